package device

import (
	"bytes"
	"encoding/binary"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"falconnic/device/storage/blktest"
	"falconnic/vhostuser"
	"falconnic/vhostuser/vhostusertest"
)

const nvmeDaemonConfig = `{
  "control": "ctl.sock",
  "nics": [
    {"name": "host", "socket": "host.sock", "mac": "52:54:00:00:00:01"},
    {"name": "store", "socket": "store.sock", "mac": "52:54:00:00:00:02"}
  ],
  "nvme": {
    "namespaces": [
      {"nic": "store", "nsid": 1, "backing": "memory", "size": 4194304},
      {"nic": "store", "nsid": 2, "backing": "ns2.img", "size": 1048576, "block_size": 4096}
    ],
    "disks": [
      {"name": "d0", "socket": "vm/d0.sock", "nic": "host", "target": "store", "nsid": 1, "serial": "d0-serial"},
      {"name": "d1", "socket": "vm/d1.sock", "nic": "host", "target": "store", "nsid": 2}
    ]
  }
}`

// TestDaemonServesConfiguredDisks: the config's disks come up as
// vhost-user-blk sockets whose blocks live in the target NIC's namespace.
func TestDaemonServesConfiguredDisks(t *testing.T) {
	d := startDaemon(t, nvmeDaemonConfig)
	dir := filepath.Dir(d.ControlSocket())
	sock := filepath.Join(dir, "vm", "d0.sock")
	gm, err := vhostusertest.NewGuestMemory(vhostusertest.OneRegion(8 << 20))
	if err != nil {
		t.Fatal(err)
	}
	defer gm.Close()
	q, err := vhostusertest.NewDriverQueue(gm, 0, 64, 0, 16<<10)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	// The disk's socket appears, and then listens, once the daemon runs:
	// dial until it answers (bounded; generous for a loaded machine).
	deadline := time.Now().Add(30 * time.Second)
	fe, err := vhostusertest.Dial(sock, gm, []*vhostusertest.DriverQueue{q})
	for err != nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		fe, err = vhostusertest.Dial(sock, gm, []*vhostusertest.DriverQueue{q})
	}
	if err != nil {
		t.Fatal(err)
	}
	defer fe.Close()
	cfg, err := fe.BlkInit(57)
	if err != nil {
		t.Fatal(err)
	}
	if got := binary.LittleEndian.Uint64(cfg); got != 8192 { // 4 MiB in 512-byte sectors
		t.Fatalf("capacity bytes % x", cfg[:8])
	}
	if err := fe.BlkStart(q, blktest.LinuxFeatures&^blktest.FeatureRO|vhostuser.FeatureProtocolFeatures, 0); err != nil {
		t.Fatal(err)
	}
	r := &blktest.Driver{T: t, Q: q, GM: gm}
	data := bytes.Repeat([]byte("daemon-disk-d0.."), 256)
	w := r.Request(blktest.TypeOut, 8, false, data, 4096)
	r.Run(w)
	rd := r.Request(blktest.TypeIn, 8, true, nil, 4096)
	id := r.Request(blktest.TypeGetID, 0, true, nil, 20)
	r.Run(rd, id)
	if w.Status() != blktest.StatusOK || rd.Status() != blktest.StatusOK || !bytes.Equal(rd.Data(4096), data) {
		t.Fatalf("write %d read %d or data differs", w.Status(), rd.Status())
	}
	if got := string(bytes.TrimRight(id.Data(20), "\x00")); got != "d0-serial" {
		t.Fatalf("serial %q", got)
	}
	st := d.status(t)
	if st.NVMe == nil || len(st.NVMe.Disks) != 2 {
		t.Fatalf("status nvme %+v", st.NVMe)
	}
	if st.NVMe.Disks[0].Counters["blk_writes"] != 1 || st.NVMe.Namespaces["store/1"]["write_bytes"] != 4096 ||
		st.NVMe.Disks[1].Blocks != 256 {
		t.Fatalf("status counters %+v", st.NVMe)
	}
}

func TestConfigRejectsBadNVMe(t *testing.T) {
	nic := `{"nics": [{"name": "a", "socket": "a.sock", "mac": "52:54:00:00:00:01"}], "nvme": `
	for _, c := range []struct{ name, nvme, want string }{
		{"unknown nic", `{"namespaces": [{"nic": "x", "nsid": 1, "backing": "memory", "size": 4096}]}`, "no nic"},
		{"nsid 0", `{"namespaces": [{"nic": "a", "nsid": 0, "backing": "memory", "size": 4096}]}`, "nsid"},
		{"memory without size", `{"namespaces": [{"nic": "a", "nsid": 1, "backing": "memory"}]}`, "size"},
		{"odd block size", `{"namespaces": [{"nic": "a", "nsid": 1, "backing": "memory", "size": 4096, "block_size": 1000}]}`, "block_size"},
		{"twice", `{"namespaces": [{"nic": "a", "nsid": 1, "backing": "memory", "size": 4096},
			{"nic": "a", "nsid": 1, "backing": "memory", "size": 4096}]}`, "twice"},
		{"disk without namespace", `{"disks": [{"name": "d", "socket": "d.sock", "nic": "a", "target": "a", "nsid": 1}]}`, "exports no nsid"},
		{"disk socket clash", `{"namespaces": [{"nic": "a", "nsid": 1, "backing": "memory", "size": 4096}],
			"disks": [{"name": "d", "socket": "a.sock", "nic": "a", "target": "a", "nsid": 1}]}`, "socket"},
		{"long serial", `{"namespaces": [{"nic": "a", "nsid": 1, "backing": "memory", "size": 4096}],
			"disks": [{"name": "d", "socket": "d.sock", "nic": "a", "target": "a", "nsid": 1, "serial": "012345678901234567890"}]}`, "serial"},
		{"negative cores", `{"cores": -1}`, "nvme.cores"},
		{"too many cores", `{"cores": 65}`, "nvme.cores"},
		{"unknown aio", `{"namespaces": [{"nic": "a", "nsid": 1, "backing": "memory", "size": 4096, "aio": "native"}]}`, "aio"},
	} {
		_, err := ParseConfig([]byte(nic + c.nvme + "}"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want one mentioning %q", c.name, err, c.want)
		}
	}
}
