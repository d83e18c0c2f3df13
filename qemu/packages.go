package qemu

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"sort"
	"strings"
)

// KernelRelease is the guest kernel's release; KernelPackage ships it.
const (
	KernelRelease = "6.1.0-56-amd64"
	KernelPackage = "linux-image-" + KernelRelease
)

// ToolPackages are the Debian packages whose programs go into the guest,
// with every shared library they need.
var ToolPackages = []string{
	"libibverbs1", "ibverbs-providers", "ibverbs-utils", // rdma-core: verbs, providers, ibv_*
	"librdmacm1", "rdmacm-utils", // rdma_cm, rping
	"perftest", // ib_write_bw and friends
	"fio",
	"nvme-cli",
	"iproute2",  // ip, rdma
	"e2fsprogs", // mkfs.ext4
	"iperf3", "libiperf0",
}

// toolPaths selects which files of the tool packages go into the image:
// programs, and the libibverbs providers, which are dlopen'ed and so never
// show up as DT_NEEDED.
var toolPaths = regexp.MustCompile(`^((usr/)?s?bin/[^/]+|etc/libibverbs\.d/[^/]+\.driver|usr/lib/x86_64-linux-gnu/libibverbs/lib[^/]+\.so)$`)

// notLibraries are dependency-closure packages named lib* that carry no
// shared library a tool needs (interpreters' runtimes, data, PAM).
var notLibraries = regexp.MustCompile(`perl|python|^libpam|^libdebian-installer|^libsemanage|^libaudit-common|^libtirpc-common|-common$|-data$`)

// Package is one Debian package at one version.
type Package struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// libraryPackages lists the lib* packages in the dependency closure of the
// tool packages: where their shared libraries come from. The image takes
// only the libraries the ELF closure reaches.
func libraryPackages(ctx context.Context) ([]string, error) {
	args := []string{"depends", "--recurse", "--no-recommends", "--no-suggests", "--no-conflicts",
		"--no-breaks", "--no-replaces", "--no-enhances"}
	out, err := exec.CommandContext(ctx, "apt-cache", append(args, ToolPackages...)...).Output()
	if err != nil {
		return nil, fmt.Errorf("apt-cache depends: %w", cmdErr(err))
	}
	set := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		l := sc.Text()
		if l == "" || l[0] == ' ' || l[0] == '<' {
			continue
		}
		if (strings.HasPrefix(l, "lib") || strings.HasPrefix(l, "zlib")) && !notLibraries.MatchString(l) {
			set[l] = true
		}
	}
	for _, p := range ToolPackages {
		delete(set, p)
	}
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

// candidateVersions asks apt which version of each package it would fetch.
func candidateVersions(ctx context.Context, names []string) ([]Package, error) {
	out, err := exec.CommandContext(ctx, "apt-cache", append([]string{"policy"}, names...)...).Output()
	if err != nil {
		return nil, fmt.Errorf("apt-cache policy: %w", cmdErr(err))
	}
	got := ParsePolicy(string(out))
	pkgs := make([]Package, 0, len(names))
	var missing []string
	for _, n := range names {
		v := got[n]
		if v == "" || v == "(none)" {
			missing = append(missing, n)
			continue
		}
		pkgs = append(pkgs, Package{n, v})
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("apt has no candidate for %s (run apt-get update?)", strings.Join(missing, ", "))
	}
	return pkgs, nil
}

// ParsePolicy reads `apt-cache policy` output into package → candidate.
func ParsePolicy(s string) map[string]string {
	m := map[string]string{}
	cur := ""
	for _, l := range strings.Split(s, "\n") {
		if l != "" && l[0] != ' ' && strings.HasSuffix(l, ":") {
			cur = strings.TrimSuffix(l, ":")
			if i := strings.Index(cur, ":"); i >= 0 { // name:arch
				cur = cur[:i]
			}
			continue
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "Candidate:"); ok && cur != "" {
			m[cur] = strings.TrimSpace(v)
		}
	}
	return m
}

// debGlob matches the file apt-get download gives a package (the epoch's
// colon is escaped as %3a; the architecture is amd64 or all).
func debGlob(p Package) string {
	return p.Name + "_" + strings.ReplaceAll(p.Version, ":", "%3a") + "_*.deb"
}

// cmdErr adds a command's stderr to its error.
func cmdErr(err error) error {
	if ee, ok := err.(*exec.ExitError); ok && len(ee.Stderr) > 0 {
		return fmt.Errorf("%v: %s", err, strings.TrimSpace(string(ee.Stderr)))
	}
	return err
}
