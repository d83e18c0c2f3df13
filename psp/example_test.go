package psp_test

import (
	"fmt"

	"falconnic/psp"
)

// The life of one connection's security association, as the device's
// fabric and connection manager drive it: the receiving NIC gives the
// connection an SPI and derives its key, the CM carries both to the
// sender (psp/cmauth), the sender seals, the receiver finds the
// connection by the clear destination CID and opens.
func Example() {
	var master [psp.MasterKeyLen]byte
	copy(master[:], "receiving NIC's master key......")
	keys, _ := psp.NewMasterKeys(master) // once per NIC
	var counters psp.Counters            // one set per NIC, exported with Set()

	// Receiver, at connection set-up.
	spi := keys.NewSPI(0x42)
	rx, _ := psp.NewRxSA(keys, psp.AESGCM128, spi, &counters)
	key, _, _ := keys.Derive(nil, spi, psp.AESGCM128) // → the CM's SA offer

	// Sender, once the CM delivered the offer.
	tx, _ := psp.NewTxSA(psp.AESGCM128, spi, key, &counters)
	pkt := []byte{0x10, 0x00, 0x00, 0x07, 'h', 'e', 'l', 'l', 'o'} // Falcon W0: version 1, DCID 7
	dgram, _ := tx.Seal(make([]byte, 0, len(pkt)+psp.Overhead), pkt, 12345)

	// Receiver, per datagram: the clear word names the connection.
	w0, _ := psp.PeekClear(dgram)
	fmt.Printf("DCID %d\n", uint32(w0[1])<<16|uint32(w0[2])<<8|uint32(w0[3]))
	got, iv, drop := rx.Open(dgram)
	fmt.Printf("%q ts=%d seq=%d drop=%v\n", got[4:], iv.Timestamp(), iv.Seq(), drop != 0)
	// Output:
	// DCID 7
	// "hello" ts=12345 seq=1 drop=false
}
