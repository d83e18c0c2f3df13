// Command nfsrdma serves and mounts NFSv4 over RDMA in a guest that has
// the kernel's NFS server and client but none of nfs-utils (no rpc.nfsd,
// rpc.mountd, exportfs or mount.nfs):
//
//	nfsrdma serve -client IP [-dir /srv/nfs] [-port 20049] [-threads 4] [-grace 10]
//	nfsrdma mount -server IP -client IP [-port 20049] DIR
//	nfsrdma write -mib N FILE
//	nfsrdma read FILE
//
// serve mounts a tmpfs on DIR and exports it to the client's address as
// the NFSv4 root (fsid=0), by writing the entries rpc.mountd would write
// into the kernel's export caches itself (auth.unix.ip, nfsd.fh,
// nfsd.export; formats of net/sunrpc/svcauth_unix.c ip_map_parse and
// fs/nfsd/export.c expkey_parse, svc_export_parse in Linux 6.1). It then
// starts nfsd with NFSv4 only (no lockd, no rpcbind registration needed),
// a short grace period and one RDMA listener on port.
//
// mount is mount(2) of IP:/ with fstype nfs4 and the text options
// mount.nfs would pass (vers=4.2, proto=rdma, port, addr, clientaddr).
//
// write fills FILE with N MiB of pseudo-random bytes, fsyncs and closes it;
// read reads FILE. Both print one line: bytes, SHA-256 and seconds.
package main

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "nfsrdma:", err)
		os.Exit(1)
	}
}

const usage = "usage: nfsrdma serve|mount|write|read ... (see the package comment)"

func run(args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], out)
	case "mount":
		return mount(args[1:], out)
	case "write":
		return write(args[1:], out)
	case "read":
		return read(args[1:], out)
	}
	return errors.New(usage)
}

// Export flags of include/uapi/linux/nfsd/export.h.
const (
	expInsecurePort   = 0x0002 // NFSEXP_INSECURE_PORT
	expNoSubtreeCheck = 0x0400 // NFSEXP_NOSUBTREECHECK
	expFSID           = 0x2000 // NFSEXP_FSID: the export's fsid= is its identity
)

// fsidNum is FSID_NUM (fs/nfsd/nfsfh.h): a file handle's filesystem is
// named by a 4-byte number, the export's fsid.
const fsidNum = 1

// exportDomain is the auth_domain the client's address maps to.
const exportDomain = "falconnic"

// nobody is the anonymous uid and gid (no squashing is asked for).
const nobody = 65534

// cacheLines are the export cache entries that make dir the NFSv4 root
// (fsid=0), read-write without root squashing, for client, until expiry
// (wall-clock seconds). Each is one write to its cache's channel.
func cacheLines(client net.IP, dir string, expiry int64) [][2]string {
	flags := expInsecurePort | expNoSubtreeCheck | expFSID
	return [][2]string{
		// class address expiry domain
		{"/proc/net/rpc/auth.unix.ip/channel", fmt.Sprintf("nfsd %s %d %s\n", client, expiry, exportDomain)},
		// domain fsidtype fsid(hex, 4 bytes of the number 0) expiry path
		{"/proc/net/rpc/nfsd.fh/channel", fmt.Sprintf("%s %d \\x00000000 %d %s\n", exportDomain, fsidNum, expiry, dir)},
		// domain path expiry flags anonuid anongid fsid
		{"/proc/net/rpc/nfsd.export/channel", fmt.Sprintf("%s %s %d %d %d %d 0\n", exportDomain, dir, expiry, flags, nobody, nobody)},
	}
}

// writeControl writes s to a proc/nfsd control file in one write, as the
// kernel's parsers want it.
func writeControl(path, s string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.Write([]byte(s)); err != nil {
		f.Close()
		return fmt.Errorf("write %q to %s: %w", strings.TrimSpace(s), path, err)
	}
	return f.Close()
}

func serve(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	client := fs.String("client", "", "the client's IPv4 address")
	dir := fs.String("dir", "/srv/nfs", "directory to export (a new tmpfs is mounted on it)")
	port := fs.Int("port", 20049, "RDMA listener port (20049: NFS/RDMA's IANA port)")
	threads := fs.Int("threads", 4, "nfsd threads")
	grace := fs.Int("grace", 10, "NFSv4 grace and lease time, seconds (the kernel's minimum is 10)")
	tmpfsMiB := fs.Int("size", 512, "tmpfs size, MiB")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ip := net.ParseIP(*client).To4()
	if ip == nil {
		return fmt.Errorf("serve: -client %q is not an IPv4 address", *client)
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", *dir, "tmpfs", 0, fmt.Sprintf("size=%dm,mode=0777", *tmpfsMiB)); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", *dir, err)
	}
	if err := unix.Mount("nfsd", "/proc/fs/nfsd", "nfsd", 0, ""); err != nil && !errors.Is(err, unix.EBUSY) {
		return fmt.Errorf("mount nfsd on /proc/fs/nfsd: %w", err)
	}
	// Wall-clock expiry (get_expiry subtracts the boot time): ten years.
	expiry := time.Now().Unix() + 10*365*24*3600
	for _, l := range cacheLines(ip, *dir, expiry) {
		if err := writeControl(l[0], l[1]); err != nil {
			return err
		}
	}
	g := strconv.Itoa(*grace) + "\n"
	steps := [][2]string{
		{"/proc/fs/nfsd/versions", "-2 -3 +4 +4.1 +4.2\n"}, // v4 only: no lockd, no mountd
		{"/proc/fs/nfsd/nfsv4gracetime", g},
		{"/proc/fs/nfsd/nfsv4leasetime", g},
		{"/proc/fs/nfsd/portlist", fmt.Sprintf("rdma %d\n", *port)},
		{"/proc/fs/nfsd/threads", strconv.Itoa(*threads) + "\n"},
	}
	for _, s := range steps {
		if err := writeControl(s[0], s[1]); err != nil {
			return err
		}
	}
	pl, _ := os.ReadFile("/proc/fs/nfsd/portlist")
	fmt.Fprintf(out, "nfsrdma: serving %s (fsid=0) to %s; listeners: %s\n", *dir, ip,
		strings.Join(strings.Fields(string(pl)), " "))
	return nil
}

func mount(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("mount", flag.ContinueOnError)
	server := fs.String("server", "", "the server's IPv4 address")
	client := fs.String("client", "", "this guest's IPv4 address")
	port := fs.Int("port", 20049, "the server's RDMA port")
	tries := fs.Int("tries", 5, "mount attempts, 2 s apart")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("mount: want one directory")
	}
	sip, cip := net.ParseIP(*server).To4(), net.ParseIP(*client).To4()
	if sip == nil || cip == nil {
		return fmt.Errorf("mount: -server %q and -client %q must be IPv4 addresses", *server, *client)
	}
	dir := fs.Arg(0)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	opts := fmt.Sprintf("vers=4.2,proto=rdma,port=%d,addr=%s,clientaddr=%s,sec=sys,hard,timeo=600", *port, sip, cip)
	var err error
	for try := 1; try <= *tries; try++ {
		start := time.Now()
		err = unix.Mount(sip.String()+":/", dir, "nfs4", 0, opts)
		if err == nil {
			fmt.Fprintf(out, "nfsrdma: mounted %s:/ on %s (%s) in %.2fs\n", sip, dir, opts, time.Since(start).Seconds())
			return nil
		}
		if try < *tries {
			time.Sleep(2 * time.Second)
		}
	}
	return fmt.Errorf("mount %s:/ on %s (%s): %w", sip, dir, opts, err)
}

// result prints one line of a transfer: bytes, SHA-256, seconds, MB/s.
func result(out io.Writer, op string, n int64, sum []byte, d time.Duration) {
	fmt.Fprintf(out, "nfsrdma: %s bytes=%d sha256=%s seconds=%.3f MBps=%.2f\n",
		op, n, hex.EncodeToString(sum), d.Seconds(), float64(n)/1e6/d.Seconds())
}

func write(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("write", flag.ContinueOnError)
	mib := fs.Int("mib", 16, "MiB to write")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 || *mib < 1 {
		return errors.New("write: want -mib N (N ≥ 1) and one file")
	}
	var seed [32]byte
	if _, err := rand.Read(seed[:]); err != nil {
		return err
	}
	src := mrand.NewChaCha8(seed)
	f, err := os.OpenFile(fs.Arg(0), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	h := sha256.New()
	buf := make([]byte, 1<<20)
	start := time.Now()
	for i := 0; i < *mib; i++ {
		src.Read(buf)
		h.Write(buf)
		if _, err := f.Write(buf); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("fsync: %w", err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	result(out, "write", int64(*mib)<<20, h.Sum(nil), time.Since(start))
	return nil
}

func read(args []string, out io.Writer) error {
	if len(args) != 1 {
		return errors.New("read: want one file")
	}
	f, err := os.Open(args[0])
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	start := time.Now()
	n, err := io.CopyBuffer(h, f, make([]byte, 1<<20))
	if err != nil {
		return err
	}
	result(out, "read", n, h.Sum(nil), time.Since(start))
	return nil
}
