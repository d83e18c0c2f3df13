// Command rawframe sends Ethernet frames given in hex on an interface
// through an AF_PACKET socket, as written (no header added):
//
//	rawframe IFACE HEX [HEX...]
//
// Tests use it to put forged frames on a guest's own paths (for example,
// reflected into the receive path by a tc mirred rule) and check that the
// guest's driver refuses them.
package main

import (
	"encoding/hex"
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "rawframe:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) < 2 {
		return fmt.Errorf("usage: rawframe IFACE HEX [HEX...]")
	}
	ifi, err := net.InterfaceByName(args[0])
	if err != nil {
		return err
	}
	frames := make([][]byte, 0, len(args)-1)
	for _, h := range args[1:] {
		f, err := hex.DecodeString(h)
		if err != nil {
			return fmt.Errorf("frame %q: %w", h, err)
		}
		if len(f) < 14 || len(f) > 1514 {
			return fmt.Errorf("frame of %d bytes: want 14..1514", len(f))
		}
		frames = append(frames, f)
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0) // protocol 0: send only
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	for _, f := range frames {
		sa := &unix.SockaddrLinklayer{Ifindex: ifi.Index, Protocol: htons(uint16(f[12])<<8 | uint16(f[13])), Halen: 6}
		copy(sa.Addr[:], f[0:6])
		if err := unix.Sendto(fd, f, 0, sa); err != nil {
			return err
		}
	}
	fmt.Printf("sent %d frames on %s\n", len(frames), args[0])
	return nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
