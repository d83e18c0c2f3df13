// Command agent is falconnic's guest agent: it runs commands for the host,
// speaking guest/agentproto over virtio-vsock and over a virtio-serial port.
//
// It is started by guest/uinit. With -ready-fd it closes that descriptor once
// its listeners are up, which is how uinit knows the guest is ready.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"falconnic/guest/agentproto"

	"github.com/mdlayher/vsock"
)

func main() {
	port := flag.Uint("vsock-port", 1024, "vsock port to listen on (0: none)")
	serial := flag.String("serial", "falconnic.agent", "name of the virtio-serial port to serve (empty: none)")
	diag := flag.String("diag-serial", "falconnic.diag", "name of a second virtio-serial port, served apart so that a long command on the first cannot block a diagnosis (empty: none; a machine without it is fine)")
	readyFD := flag.Int("ready-fd", -1, "close this descriptor once listening")
	flag.Parse()
	log.SetPrefix("falconnic-agent: ")
	log.SetFlags(0)

	host, _ := os.Hostname()
	env := []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin:/bbin", "HOME=/root", "TERM=dumb"}
	counters := new(agentproto.Counters)
	newServer := func(resync bool) *agentproto.Server {
		return &agentproto.Server{Hostname: host, Env: env, Resync: resync, Counters: counters,
			Commands: map[string]string{"sh": "gosh"}}
	}

	listening := 0
	if *port != 0 {
		l, err := vsock.Listen(uint32(*port), nil)
		if err != nil {
			log.Printf("vsock port %d: %v (serving virtio-serial only)", *port, err)
		} else {
			listening++
			go serveListener(l, newServer)
		}
	}
	if *serial != "" {
		dev, err := findPort(*serial, 10*time.Second)
		if err != nil {
			log.Printf("virtio-serial: %v", err)
		} else {
			listening++
			go servePort(dev, newServer(true))
		}
	}
	if *diag != "" {
		go func() {
			if dev, err := findPort(*diag, 10*time.Second); err == nil {
				servePort(dev, newServer(true))
			}
		}()
	}
	if listening == 0 {
		log.Fatal("no transport to serve")
	}
	if *readyFD >= 0 {
		os.NewFile(uintptr(*readyFD), "ready").Close()
	}
	select {}
}

func serveListener(l net.Listener, newServer func(bool) *agentproto.Server) {
	for {
		conn, err := l.Accept()
		if err != nil {
			log.Printf("vsock accept: %v", err)
			time.Sleep(time.Second)
			continue
		}
		go func() {
			defer conn.Close()
			if err := newServer(false).Serve(conn); err != nil {
				log.Printf("vsock session: %v", err)
			}
		}()
	}
}

// servePort serves a virtio-serial port for ever.
//
// The port has no connections: a read returns end of file while no host is
// attached. The port stays open across sessions: closing it would make the
// kernel discard data already received (discard_port_data), such as the
// Hello of a host that connected just after the previous one left. So at
// end of file the agent pauses and serves the same open port again; it
// reopens only after a real error.
func servePort(dev string, s *agentproto.Server) {
	for {
		f, err := os.OpenFile(dev, os.O_RDWR, 0)
		if err != nil {
			log.Printf("open %s: %v", dev, err)
			time.Sleep(time.Second)
			continue
		}
		for {
			err := s.Serve(f)
			if err != nil && !errors.Is(err, io.EOF) {
				log.Printf("serial session: %v", err)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		f.Close()
		time.Sleep(time.Second)
	}
}

// findPort finds the /dev node of the virtio-serial port called name. There
// is no udev in the guest, so /dev/virtio-ports/NAME may not exist: look the
// name up in sysfs.
func findPort(name string, wait time.Duration) (string, error) {
	deadline := time.Now().Add(wait)
	for {
		if p := "/dev/virtio-ports/" + name; exists(p) {
			return p, nil
		}
		names, _ := filepath.Glob("/sys/class/virtio-ports/*/name")
		for _, n := range names {
			b, err := os.ReadFile(n)
			if err == nil && strings.TrimSpace(string(b)) == name {
				dev := "/dev/" + filepath.Base(filepath.Dir(n))
				if exists(dev) {
					return dev, nil
				}
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no virtio-serial port named %q", name)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
