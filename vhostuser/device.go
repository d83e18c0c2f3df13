package vhostuser

import "errors"

// ErrNoConfig is returned by devices whose config space QEMU emulates (net).
var ErrNoConfig = errors.New("vhostuser: device has no config space")

// Device is what a virtio device (net, blk, vsock) implements to be served
// over vhost-user. The back-end handles the protocol, memory and rings; the
// device sees negotiated features and one *Queue per started ring. A Device
// outlives sessions: QEMU may reconnect at any time.
type Device interface {
	// Features returns the virtio feature bits offered (VERSION_1, ring and
	// device bits). The back-end adds VHOST_USER_F_PROTOCOL_FEATURES.
	Features() uint64
	// ProtocolFeatures returns protocol bits beyond the generic set
	// (MQ, REPLY_ACK, RESET_DEVICE, CONFIGURE_MEM_SLOTS, STATUS), e.g.
	// CONFIG or INFLIGHT_SHMFD.
	ProtocolFeatures() uint64
	// NumQueues is the number of virtqueues the back-end handles.
	NumQueues() int
	// QueueNum is the GET_QUEUE_NUM answer: queue pairs for net, queues for blk.
	QueueNum() uint64
	// GetConfig reads size bytes of config space at offset.
	GetConfig(offset, size uint32) ([]byte, error)
	// SetConfig writes config space.
	SetConfig(offset uint32, data []byte) error
	// SetFeatures is called on every SET_FEATURES (it repeats and may change:
	// latest wins) with the acked bits.
	SetFeatures(acked uint64)
	// RunQueue is the body of the queue's one owning goroutine. It waits on
	// q.Wake() and q.Done(), calls q.Pop/Push/Notify (or q.Refresh after a
	// wake with nothing to pop), and returns promptly once q.Done() is closed.
	RunQueue(q *Queue)
}

// MemTableUser is implemented by devices that reach guest memory outside
// their rings, such as a DMA engine. The session hands the device every new
// memory table before it releases the old one, and nil when the session
// ends. The device must take its own reference (TryAcquire) around each use
// and retry with the newest table when that fails.
type MemTableUser interface {
	SetMemTable(t *MemTable)
}

// DeviceResetter is implemented by devices that keep state for the
// guest's driver outside the rings (an RDMA function's QPs and MRs): the
// session tells them of RESET_OWNER and RESET_DEVICE — the driver is gone
// (guest reboot, driver reload) though the session and its memory table
// stay — after it stopped every ring.
type DeviceResetter interface {
	ResetDevice()
}

// genericProtocolFeatures are handled by the back-end for every device.
const genericProtocolFeatures = ProtoMQ | ProtoReplyAck | ProtoResetDevice | ProtoConfigureMemSlots | ProtoStatus
