// Package rdmauapi mirrors the falconnic control channel, the contract
// between the guest's falconnic.ko and the NIC's RDMA function. The C header
// guest-driver/include/uapi/falconnic.h is the source of truth; this package
// gives the device side byte views of every message with getters and setters
// (views.go), the table of message types (opcode.go), and a decoder that
// validates every header field before a body is looked at (decode.go).
// layout_test.go compiles a C program against the header with gcc and checks
// every struct size and field offset here against it.
//
// Transport: one message per Ethernet frame, EtherType 0x88B5, destination
// and source MAC both the NIC's own MAC. The frame payload is a 32-byte
// Hdr followed by Hdr.Length() body bytes and possibly padding.
//
// Roles and flow:
//
//	driver ──request (req_id≠0)──▶ NIC      every opcode of Table with a request body
//	driver ◀──reply (F_REPLY)───── NIC      same opcode and req_id, status, reply body if OK
//	driver ──doorbell (F_NO_REPLY)▶ NIC     DB_SQ, DB_RQ, DB_SRQ; never answered
//	driver ◀──event (F_EVENT)────── NIC     EV_*, req_id 0, Event body
//
// Instances: the driver picks a random 64-bit instance id per bound netdev.
// OPEN makes it the owner of the NIC's RDMA function (the NIC destroys every
// object of other instances); CLOSE destroys every object of the instance;
// anything else from an instance that is not open fails with
// StatusBadInstance. The NIC also drops all RDMA objects when the guest's
// virtio-net device resets or its vhost-user session ends.
//
// Handles are chosen by the driver (so it can always destroy what it asked
// for, even after a timeout); a QP handle is its QPN, an AH handle is the
// ah_num of UD send WQEs, MR keys are chosen by the driver too.
//
// Guest memory (MRs, rings) is described by a PBL: a one- or two-level page
// list held in guest memory (see PBL). Rings are struct rxe_queue_buf from
// <rdma/rdma_user_rxe.h>: RingHdrSize bytes of header then the slots.
//
// Invariants: every decoder entry point validates lengths before slicing,
// never panics on any input (FuzzDecode), and reports each rejection with
// its own error value (see the Err* variables) so callers count drops by
// cause.
package rdmauapi
