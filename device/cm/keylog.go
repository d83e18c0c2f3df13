package cm

import (
	"falconnic/psp"
	"falconnic/psp/cmauth"
)

// The key log (`falconnic capture --keylog`, issue 20): while a capture
// asks for it, the daemon writes down every PSP key its NICs seal or open
// with, so a dissector can decrypt what a tap on the wire saw, as
// SSLKEYLOGFILE does for TLS. The manager tells KeyHook of each key when
// an SA is made or rekeyed; LogKeys lists the keys of the connections
// that are up when a capture starts. Keys are made at connection set-up
// and rotation only, never per datagram, so the hook is off the datapath.

// KeyDir says which datagrams a key protects, seen from its NIC.
type KeyDir uint8

// Key directions.
const (
	// KeyRx: datagrams to the NIC, under an SPI it gave the connection and
	// the key derived from its master key.
	KeyRx KeyDir = 1
	// KeyTx: datagrams the NIC sends, under the SPI and key its peer
	// offered.
	KeyTx KeyDir = 2
)

// String names the direction as the key log writes it.
func (d KeyDir) String() string {
	switch d {
	case KeyRx:
		return "rx"
	case KeyTx:
		return "tx"
	}
	return "?"
}

// KeyEvent is one PSP key a NIC uses.
type KeyEvent struct {
	NIC [6]byte // the NIC's MAC
	Dir KeyDir
	SA  cmauth.SA
}

// logKey tells the manager's KeyHook, if any, of a key of the agent's NIC.
func (a *Agent) logKey(dir KeyDir, sa *cmauth.SA) {
	if h := a.cm.KeyHook; h != nil {
		h(KeyEvent{NIC: a.mac, Dir: dir, SA: *sa})
	}
}

// LogKeys hands emit every key the NIC's sealed connections use now: each
// receive SA's current and still accepted previous SPI, each transmit SA,
// and the receive SA offered by a set-up under way. On the port's
// goroutine (port.Port.Do).
func (a *Agent) LogKeys(emit func(KeyEvent)) {
	if a.keys == nil || a.cm.sec == nil {
		return
	}
	v := a.cm.sec.Version
	rx := func(spi psp.SPI) {
		sa := cmauth.SA{Version: v, SPI: spi}
		if _, _, err := a.keys.Derive(sa.Key[:0], sa.SPI, v); err == nil {
			emit(KeyEvent{NIC: a.mac, Dir: KeyRx, SA: sa})
		}
	}
	for _, c := range a.conns {
		if c.rx != nil {
			rx(c.rx.SPI())
			if p := c.rx.PrevSPI(); p != 0 {
				rx(p)
			}
		}
		if c.pend != nil {
			emit(KeyEvent{NIC: a.mac, Dir: KeyRx, SA: c.offer})
		}
		if c.tx != nil {
			emit(KeyEvent{NIC: a.mac, Dir: KeyTx, SA: c.tx.sa})
		}
	}
}
