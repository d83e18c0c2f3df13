// Package verbs is falconnic's RDMA verbs engine: the upper-layer protocol
// that runs on the NIC on top of the Falcon transport (package falcon),
// speaking the Soft-RoCE user ABI that stock librxe writes into rings in
// guest memory.
//
// Roles. An Engine is one NIC's RDMA function. Its object tables (PD, MR,
// CQ, QP, SRQ, AH) are filled by the control channel (device translates
// the guest driver's frames into calls such as RegMR and ModifyQP); its
// requester takes send WQEs from SQ rings (rxe_queue_buf of rxe_send_wqe)
// and turns them into Falcon pushes and pulls; its responder is the
// falcon.ULP that places incoming WRITEs and SENDs into guest memory,
// answers READs and atomics, and writes ib_uverbs_wc CQEs.
//
// Guest memory is reached only through Memory (GPA reads/writes bounds
// checked by the implementation) and through regions laid over page lists
// that were validated at registration: a WQE naming memory outside its MR,
// an unknown key, a key of another PD or without the needed access fails
// with a completion status and touches nothing. Each NIC has its own
// Engine and Memory, so a request from one VM can reach another VM's
// memory only through an rkey that VM registered.
//
// QP state machine [IB 10.3, 11.2.4.2]:
//
//	RESET ─▶ INIT ─▶ RTR ─▶ RTS ⇄ SQD
//	  ▲                      │ ▲
//	  │       UC/UD send error ▼ │ MODIFY_QP
//	  │                        SQE (send queue flushed, receives go on)
//	  └── any ── any ─▶ ERR (flush: every WQE completes with WR_FLUSH_ERR)
//
// The table qpTransitions lists per QP type the attributes each
// transition requires and allows (TransitionOK).
//
// Mapping to Falcon [digest §9.2]: RC and UC QPs use the ordered
// connection the connection manager keeps to the peer NIC (looked up by the
// address vector's destination MAC); UD QPs use the same per-NIC-pair
// connections, chosen per WQE from the address handle. SEND and WRITE are
// segmented into pushes (of at most the path MTU for UD) with RBTH and
// extension headers; READ and atomics are pulls (Conn.PullHeader) whose Pull Request
// carries the request headers and whose Pull Data carries the response.
//
// Errors: remote access and protocol errors come back as complete-in-error
// NACKs (pushes) or CE Pull Data (pulls) carrying an IB syndrome; the
// requester completes the WQE with the matching status (REM_ACCESS_ERR,
// REM_INV_REQ_ERR, RNR_RETRY_EXC_ERR) and moves the QP to ERR. Transport
// exhaustion (kCmplLocalTO, dead connection) completes with RETRY_EXC_ERR.
// RNR: a SEND with no receive WQE is NACKed RNR with the responder's
// min_rnr_timer; Falcon resends it; the responder counts the NACKs against
// the requester's rnr_retry (carried in a reserved RBTH field) and gives
// up with the RNR syndrome. A full CQ loses the CQE, raises EvCQErr and
// moves the QP to ERR.
//
// Design decisions where the task was silent:
//   - One ordered connection per NIC pair carries every QP between them;
//     an RNR on one QP holds later requests of the others (head of line).
//   - RC and UC messages are segmented at the transport's MTU
//     (Config.PMTUCap, or what the connection's MTU holds where that is
//     more: between two NICs of one daemon), whatever path MTU the guest
//     set: segments never cross the path it describes, and rdma_cm sets
//     1024 from the guest's 1500-byte netdev. UD messages are still
//     bounded by the path MTU.
//   - READs are segmented like that too, without regard to local SGE
//     boundaries (data is scattered into the SGEs on arrival).
//   - UD receives get a 40-byte GRH area and IBV_WC_GRH, as rxe does, for
//     user and kernel QPs alike: for IPv4 20 zero bytes then an IPv4 header
//     (valid checksum), for IPv6 the IPv6 header, built by the receiving NIC
//     from a 40-byte UD address header the sending NIC puts in front of the
//     data of every UD push (ud.go). The GIDs come from the sender's AH (the
//     guest kernel filled it at CREATE_AH) or a kernel QP's inline AV, never
//     from a user WQE's rxe_av copy (that one gives only the DMAC, and the
//     receiver then gets a zero GRH with just the version nibble). The
//     receiver validates the header (network type, IPv4-mapped GIDs for
//     IPv4) and drops and counts a bad one; the CQE's reserved byte
//     (FALCONNIC_WC_NET_TYPE_OFF) tells the driver the network type. Q_Key
//     mismatches and UD messages without a receive WQE are dropped and
//     counted.
//   - GSI (QP1) is a UD QP with the fixed handle GSIQPN, created only as a
//     kernel QP; its Q_Key is GSIQKey and cannot be changed; its state
//     transitions are UD's without the port attribute (as ib_mad drives
//     it). Kernel QPs (QPSpec.Kernel) may name guest-physical memory with
//     DMALKey (bounds checked against guest RAM, never an rkey, refused on
//     user QPs) and carry their UD address vectors inline in the WQE
//     (ah_num 0), since the guest kernel's AHs never reach the NIC.
//   - Kernel RC and UC QPs work like user ones; their SGEs may also use
//     DMALKey. Fast registration (frwr.go): AllocMR makes an MR in FREE
//     whose page list the kernel fills per registration; REG_MR and
//     LOCAL_INV are local work requests of kernel QPs executed in SQ order
//     (no transaction), SEND_WITH_INV invalidates the receiver's MR (its
//     receive CQE carries WCFlagWithInv and the rkey). Only VALID MRs
//     translate; DMALKey is never an rkey.
//   - A CQ may be armed through a word in its ring header (CQArmWordOff)
//     instead of ARM_CQ requests, so that the guest kernel can arm from
//     softirq context without waiting for the NIC.
//   - Doorbell polling (poll.go, off unless SetPolling turns it on): the
//     engine sets an SQ ring's polling flag (SQPollFlagOff) while it drains
//     the SQ and for an adaptive window after, polling the producer index in
//     OnTimer, so the driver sends no DB_SQ; it clears the flag with a full
//     barrier and reads the producer index again, never losing a post.
//   - Fences are implicit: an ordered connection completes in order.
//   - Each READ segment is its own pull, so every response is a
//     ReadResponseOnly; the requester places segments in RSN order.
//   - Ring indices are compared modulo the slot count and written masked,
//     as librxe keeps them (the uapi comment says free-running; both work).
//   - A QP holds at most opsWindow (128) send WQEs in flight and the NIC's
//     page lists are bounded by Limits.MaxMTTPages, so a guest's ring and
//     MR sizes cannot make the daemon allocate without bound.
//   - Connection state goes with its connection: the device calls
//     ConnDown when the connection manager closes or replaces one, and
//     entries of connections that died without it are swept as the table
//     grows.
//   - With SetGIDs (the NIC's own GIDs), a UD send whose address vector
//     carries another source GID completes with LOC_QP_OP_ERR: a guest
//     cannot put another VM's GID into a receiver's GRH.
//   - UC has no responder errors: a UC request the responder cannot take
//     is acknowledged and dropped; UC and UD send errors move the QP to SQE.
package verbs
