package qemu

import (
	"strings"
	"testing"
)

func TestArgsDisks(t *testing.T) {
	m := base()
	m.Disks = []Disk{
		{VhostUserBlk: "/run/fn/d0.sock", Queues: 2},
		{File: "/var/img/local.raw", Serial: "local"},
		{VhostUserBlk: "/run/fn/d1.sock"},
		{File: "/var/img/intx.raw", INTx: true},
		{VhostUserBlk: "/run/fn/d2.sock", INTx: true},
	}
	a, err := m.Args()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(a, " ")
	for _, want := range []string{
		"-chardev socket,id=cd0,path=/run/fn/d0.sock,reconnect=1 -device vhost-user-blk-pci,chardev=cd0,num-queues=2",
		"-drive file=/var/img/local.raw,if=none,id=d1,format=raw,cache=none,aio=native -device virtio-blk-pci,drive=d1,serial=local",
		"-chardev socket,id=cd2,path=/run/fn/d1.sock,reconnect=1 -device vhost-user-blk-pci,chardev=cd2 ",
		"-device virtio-blk-pci,drive=d3,vectors=0 ",
		"-device vhost-user-blk-pci,chardev=cd4,vectors=0",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("args lack %q:\n%s", want, got)
		}
	}
}

func TestArgsRejectBadDisks(t *testing.T) {
	for _, c := range []struct {
		name string
		disk Disk
	}{
		{"nothing", Disk{}},
		{"both", Disk{VhostUserBlk: "/s", File: "/f"}},
		{"comma in socket", Disk{VhostUserBlk: "/s,x"}},
		{"comma in file", Disk{File: "/f,x"}},
		{"17 queues", Disk{VhostUserBlk: "/s", Queues: 17}},
		{"negative queues", Disk{VhostUserBlk: "/s", Queues: -1}},
		{"queues on a file", Disk{File: "/f", Queues: 2}},
		{"serial on vhost-user", Disk{VhostUserBlk: "/s", Serial: "x"}},
		{"long serial", Disk{File: "/f", Serial: strings.Repeat("s", 21)}},
	} {
		m := base()
		m.Disks = []Disk{c.disk}
		if _, err := m.Args(); err == nil {
			t.Errorf("%s: accepted", c.name)
		}
	}
}
