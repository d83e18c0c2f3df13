package device

import (
	"time"

	"falconnic/device/capture"
	"falconnic/device/cm"
	"falconnic/falcon"
)

// The capture's key log (`falconnic capture --keylog`, capture.start's
// "keylog"): a session that asks for one also gets a line per key the
// daemon's NICs use while it runs (device/capture/keylog.go) — the keys of
// the connections up when it starts (cm.Agent.LogKeys), then each key made
// at a set-up or rotation (cm.Manager.KeyHook), and the fabric's CM key.
// While no session asks, the hook costs one atomic load per SA made, and
// nothing per datagram.

// tapKey is the connection manager's KeyHook.
func (d *Daemon) tapKey(e cm.KeyEvent) {
	if !d.capture.KeyLogActive() {
		return
	}
	d.capture.ReportKey(d.nicBit(e.NIC), d.keyLine(e))
}

// keyLine is the key-log line of e.
func (d *Daemon) keyLine(e cm.KeyEvent) string {
	name := ""
	if i, ok := d.nicIndex[e.NIC]; ok {
		name = d.nics[i].spec.Name
	}
	return capture.PSPKeyLine(uint32(e.SA.SPI), e.Dir.String(), e.SA.Version.String(), e.SA.KeyBytes(), name)
}

// logKeysWait bounds how long logKeys waits for a NIC's port to list its
// keys.
const logKeysWait = 5 * time.Second

// logKeys gives a session that asked for a key log the fabric's CM key
// and the keys its NICs' connections use now, each NIC's listed on its
// port's goroutine (the owner of its connections).
func (d *Daemon) logKeys(s *capture.Session, nic int) {
	if !d.sec.on {
		return
	}
	k := d.sec.secret.KeyLogKey()
	s.AddKey(capture.CMAuthKeyLine(d.sec.fingerprint, k[:]))
	clear(k[:])
	timeout := time.NewTimer(logKeysWait)
	defer timeout.Stop()
	expired := false
	for i, n := range d.nics {
		if nic != capture.AllNICs && nic != i {
			continue
		}
		done := make(chan struct{})
		ok := !expired && n.falcon.TryDo(func(*falcon.Endpoint) {
			n.cm.LogKeys(func(e cm.KeyEvent) { s.AddKey(d.keyLine(e)) })
			close(done)
		})
		if ok {
			select {
			case <-done:
				continue
			case <-timeout.C:
				expired = true
			}
		}
		d.log.Warn("capture key log: a NIC's port did not list its keys; its connections up before the capture may not decrypt", "nic", n.spec.Name)
	}
}
