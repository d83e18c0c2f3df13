package qemu

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// recipeVersion changes whenever the way images are built changes, so old
// cached images are not reused.
const recipeVersion = "falconnic-image-3"

// ImageOptions configures Build.
type ImageOptions struct {
	// CacheDir holds downloads, u-root and the built images
	// (default DefaultCacheDir()).
	CacheDir string
	// SrcDir is the falconnic source tree: the guest programs are built
	// from SrcDir/guest.
	SrcDir string
	// Extra files to add, e.g. falconnic.ko; they are part of the cache key.
	Extra []ExtraFile
	// Modules overrides GuestModules.
	Modules []string
	// Progress receives one line per slow step (nil: quiet).
	Progress io.Writer
	// Force rebuilds even when a cached image matches.
	Force bool
}

// ExtraFile is a host file placed into the image at Dst (absolute). With
// Load, it is a kernel module that uinit loads after all of GuestModules
// (e.g. falconnic.ko; its own dependencies must be among GuestModules).
type ExtraFile struct {
	Src, Dst string
	Load     bool
}

// Image is a built guest image.
type Image struct {
	Dir      string    `json:"-"`
	Key      string    `json:"key"`
	Kernel   string    `json:"kernel"` // file names inside Dir
	Initrd   string    `json:"initrd"`
	Packages []Package `json:"packages"`
	Modules  []string  `json:"modules"` // load order
	Built    time.Time `json:"built"`
}

// KernelPath returns the kernel's path.
func (im Image) KernelPath() string { return filepath.Join(im.Dir, im.Kernel) }

// InitrdPath returns the initramfs's path.
func (im Image) InitrdPath() string { return filepath.Join(im.Dir, im.Initrd) }

// ErrNoImage means the cache holds no usable image.
var ErrNoImage = errors.New("no guest image")

// DefaultCacheDir is $FALCONNIC_CACHE, else $XDG_CACHE_HOME/falconnic, else
// ~/.cache/falconnic.
func DefaultCacheDir() string {
	if d := os.Getenv("FALCONNIC_CACHE"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "falconnic")
	}
	return filepath.Join(os.TempDir(), "falconnic-cache")
}

// LoadImage returns the image the last Build in cacheDir produced, checking
// that its files are there.
func LoadImage(cacheDir string) (Image, error) {
	b, err := os.ReadFile(filepath.Join(cacheDir, "images", "latest"))
	if err != nil {
		return Image{}, fmt.Errorf("%w in %s: run `falconnic image build`", ErrNoImage, cacheDir)
	}
	return readImage(filepath.Join(cacheDir, "images", strings.TrimSpace(string(b))))
}

func readImage(dir string) (Image, error) {
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return Image{}, fmt.Errorf("%w: broken image cache %s: %v (rebuild with `falconnic image build --force`)", ErrNoImage, dir, err)
	}
	var im Image
	if err := json.Unmarshal(b, &im); err != nil {
		return Image{}, fmt.Errorf("%w: broken image manifest %s: %v", ErrNoImage, dir, err)
	}
	im.Dir = dir
	for _, f := range []string{im.Kernel, im.Initrd} {
		if f == "" || strings.Contains(f, "/") {
			return Image{}, fmt.Errorf("%w: broken image manifest %s", ErrNoImage, dir)
		}
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() == 0 {
			return Image{}, fmt.Errorf("%w: broken image cache %s: %s missing or empty", ErrNoImage, dir, f)
		}
	}
	return im, nil
}

// builder carries one Build's state.
type builder struct {
	ctx   context.Context
	o     ImageOptions
	start time.Time
	debs  string // cache/debs
}

func (b *builder) progress(format string, args ...any) {
	if b.o.Progress != nil {
		fmt.Fprintf(b.o.Progress, "image: [%5.1fs] %s\n", time.Since(b.start).Seconds(), fmt.Sprintf(format, args...))
	}
}

// Build returns a guest image for the current inputs, building it only when
// no cached image has the same key: the hash of the package versions, the
// guest programs' sources, the module list, the extra files, u-root's and
// Go's versions and the recipe.
func Build(ctx context.Context, o ImageOptions) (Image, error) {
	if o.CacheDir == "" {
		o.CacheDir = DefaultCacheDir()
	}
	if o.Modules == nil {
		o.Modules = GuestModules
	}
	if o.SrcDir == "" {
		return Image{}, errors.New("image: no source tree (SrcDir) to build the guest programs from")
	}
	b := &builder{ctx: ctx, o: o, start: time.Now(), debs: filepath.Join(o.CacheDir, "debs")}
	for _, tool := range []string{"apt-cache", "apt-get", "dpkg-deb", "depmod", "cpio", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			return Image{}, fmt.Errorf("image: %s not found (run scripts/deps.sh)", tool)
		}
	}
	if err := os.MkdirAll(o.CacheDir, 0o755); err != nil {
		return Image{}, err
	}
	unlock, err := lockCache(o.CacheDir, b.progress)
	if err != nil {
		return Image{}, err
	}
	defer unlock()
	b.progress("resolving package versions")
	libs, err := libraryPackages(ctx)
	if err != nil {
		return Image{}, err
	}
	names := append(append([]string{KernelPackage}, ToolPackages...), libs...)
	pkgs, err := candidateVersions(ctx, names)
	if err != nil {
		return Image{}, err
	}
	guest, err := guestSources(ctx, o.SrcDir)
	if err != nil {
		return Image{}, err
	}
	gover, err := exec.CommandContext(ctx, "go", "env", "GOVERSION").Output()
	if err != nil {
		return Image{}, fmt.Errorf("go env GOVERSION: %w", cmdErr(err))
	}
	key, err := b.key(pkgs, guest, strings.TrimSpace(string(gover)))
	if err != nil {
		return Image{}, err
	}
	images := filepath.Join(o.CacheDir, "images")
	dir := filepath.Join(images, key[:16])
	if !o.Force {
		if im, err := readImage(dir); err == nil && im.Key == key {
			b.progress("cached image %s is up to date", dir)
			return im, writeLatest(images, key[:16])
		}
	}
	im, err := b.build(pkgs, guest, key, dir)
	if err != nil {
		return Image{}, err
	}
	b.progress("image ready in %s", dir)
	if err := writeLatest(images, key[:16]); err != nil {
		return Image{}, err
	}
	pruneImages(images, keepImages)
	return im, nil
}

// keepImages is how many built images the cache keeps (newest first).
const keepImages = 3

// pruneImages removes all but the newest keep image directories. A running
// QEMU does not mind: it read its kernel and initramfs at start.
func pruneImages(images string, keep int) {
	es, err := os.ReadDir(images)
	if err != nil {
		return
	}
	type dirAge struct {
		name string
		mod  time.Time
	}
	var dirs []dirAge
	for _, e := range es {
		if !e.IsDir() || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		if fi, err := e.Info(); err == nil {
			dirs = append(dirs, dirAge{e.Name(), fi.ModTime()})
		}
	}
	sort.Slice(dirs, func(i, j int) bool { return dirs[i].mod.After(dirs[j].mod) })
	for i := keep; i < len(dirs); i++ {
		os.RemoveAll(filepath.Join(images, dirs[i].name))
	}
}

// lockCache takes the cache's lock, so that concurrent builds (two test
// runs, a test and the demo) do not share a work directory.
func lockCache(dir string, progress func(string, ...any)) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		progress("waiting for another image build in %s", dir)
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			f.Close()
			return nil, err
		}
	}
	return func() { f.Close() }, nil
}

func writeLatest(images, name string) error {
	tmp := filepath.Join(images, ".latest.tmp")
	if err := os.WriteFile(tmp, []byte(name+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(images, "latest"))
}

// key hashes every input of the image.
func (b *builder) key(pkgs []Package, guest []guestFile, gover string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "recipe %s\nu-root %s\ngo %s\n", recipeVersion, URootVersion, gover)
	for _, p := range pkgs {
		fmt.Fprintf(h, "package %s %s\n", p.Name, p.Version)
	}
	fmt.Fprintf(h, "modules %s\n", strings.Join(b.o.Modules, " "))
	fmt.Fprintf(h, "staged %s\n", strings.Join(StagedModules, " "))
	fmt.Fprintf(h, "ucmds %s\n", strings.Join(URootCommands, " "))
	for _, g := range guest {
		fmt.Fprintf(h, "guest %s %x\n", g.rel, sha256.Sum256(g.data))
	}
	for _, e := range b.o.Extra {
		data, err := os.ReadFile(e.Src)
		if err != nil {
			return "", fmt.Errorf("image: extra file: %w", err)
		}
		fmt.Fprintf(h, "extra %s load=%v %x\n", e.Dst, e.Load, sha256.Sum256(data))
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// build makes the image in a temporary directory and renames it to dir.
func (b *builder) build(pkgs []Package, guest []guestFile, key, dir string) (Image, error) {
	work := filepath.Join(b.o.CacheDir, "work", key[:16])
	os.RemoveAll(work)
	defer os.RemoveAll(work)
	if err := os.MkdirAll(work, 0o755); err != nil {
		return Image{}, err
	}
	debs, err := b.download(pkgs)
	if err != nil {
		return Image{}, err
	}
	stage := filepath.Join(work, "stage")

	// The kernel and its modules.
	b.progress("extracting the kernel (%s)", KernelPackage)
	kroot := filepath.Join(work, "kernel")
	if err := run(b.ctx, "", "dpkg-deb", "-x", debs[KernelPackage], kroot); err != nil {
		return Image{}, err
	}
	if err := run(b.ctx, "", "depmod", "-b", kroot, KernelRelease); err != nil {
		return Image{}, err
	}
	order, err := b.stageModules(kroot, stage)
	if err != nil {
		return Image{}, err
	}

	// Tools and their libraries.
	b.progress("extracting %d packages", len(pkgs)-1)
	tree := filepath.Join(work, "tree")
	var roots []string
	isTool := map[string]bool{}
	for _, t := range ToolPackages {
		isTool[t] = true
	}
	for _, p := range pkgs {
		if p.Name == KernelPackage {
			continue
		}
		if err := run(b.ctx, "", "dpkg-deb", "-x", debs[p.Name], tree); err != nil {
			return Image{}, err
		}
		if isTool[p.Name] {
			files, err := debFiles(b.ctx, debs[p.Name])
			if err != nil {
				return Image{}, err
			}
			for _, f := range files {
				if toolPaths.MatchString(f) {
					roots = append(roots, f)
				}
			}
		}
	}
	t := Tree{tree}
	closure, err := LibClosure(roots, t.ReadELF, t.Resolve)
	if err != nil {
		return Image{}, fmt.Errorf("image: %w", err)
	}
	for _, r := range roots {
		src, err := t.Resolve(r)
		if err != nil {
			continue // a dangling link in a package: nothing to copy
		}
		closure[r] = src
	}
	b.progress("staging %d files from the packages", len(closure))
	for dst, src := range closure {
		if err := copyFile(filepath.Join(tree, src), filepath.Join(stage, dst)); err != nil {
			return Image{}, err
		}
	}
	for _, e := range b.o.Extra {
		if !strings.HasPrefix(e.Dst, "/") {
			return Image{}, fmt.Errorf("image: extra file destination %q is not absolute", e.Dst)
		}
		if err := copyFile(e.Src, filepath.Join(stage, cleanRel(e.Dst))); err != nil {
			return Image{}, err
		}
	}
	base := filepath.Join(work, "base.cpio")
	if err := writeCPIO(b.ctx, stage, base); err != nil {
		return Image{}, err
	}

	// The u-root userland with our guest programs, on top.
	tmp := dir + ".tmp"
	os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return Image{}, err
	}
	initrd := filepath.Join(tmp, "initramfs.cpio")
	if err := b.urootBuild(work, guest, base, initrd); err != nil {
		return Image{}, err
	}
	kernel := "vmlinuz-" + KernelRelease
	if err := copyFile(filepath.Join(kroot, "boot", kernel), filepath.Join(tmp, kernel)); err != nil {
		return Image{}, err
	}
	im := Image{Key: key, Kernel: kernel, Initrd: "initramfs.cpio", Packages: pkgs, Modules: order, Built: time.Now().UTC()}
	mb, _ := json.MarshalIndent(im, "", "  ")
	if err := os.WriteFile(filepath.Join(tmp, "manifest.json"), mb, 0o644); err != nil {
		return Image{}, err
	}
	os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		return Image{}, err
	}
	if fi, err := os.Stat(filepath.Join(dir, "initramfs.cpio")); err == nil {
		b.progress("initramfs is %.1f MiB", float64(fi.Size())/(1<<20))
	}
	im.Dir = dir
	return im, nil
}

// download fetches the packages not yet in the cache and returns each
// package's .deb path.
func (b *builder) download(pkgs []Package) (map[string]string, error) {
	if err := os.MkdirAll(b.debs, 0o755); err != nil {
		return nil, err
	}
	found := map[string]string{}
	var need []string
	for _, p := range pkgs {
		m, _ := filepath.Glob(filepath.Join(b.debs, debGlob(p)))
		if len(m) > 0 {
			found[p.Name] = m[0]
		} else {
			need = append(need, p.Name+"="+p.Version)
		}
	}
	if len(need) > 0 {
		b.progress("downloading %d Debian packages into %s", len(need), b.debs)
		// apt drops privileges to _apt when it can; a private directory
		// only makes it warn.
		if err := run(b.ctx, b.debs, "apt-get", append([]string{"download", "-q"}, need...)...); err != nil {
			return nil, err
		}
		for _, p := range pkgs {
			if found[p.Name] != "" {
				continue
			}
			m, _ := filepath.Glob(filepath.Join(b.debs, debGlob(p)))
			if len(m) == 0 {
				return nil, fmt.Errorf("image: apt-get download left no %s", debGlob(p))
			}
			found[p.Name] = m[0]
		}
	}
	return found, nil
}

// stageModules copies the module closure into stage and writes the load
// order to etc/falconnic/modules.
func (b *builder) stageModules(kroot, stage string) ([]string, error) {
	mdir := filepath.Join(kroot, "lib", "modules", KernelRelease)
	f, err := os.Open(filepath.Join(mdir, "modules.dep"))
	if err != nil {
		return nil, err
	}
	md, err := ParseModulesDep(f)
	f.Close()
	if err != nil {
		return nil, err
	}
	builtin := map[string]bool{}
	if f, err := os.Open(filepath.Join(mdir, "modules.builtin")); err == nil {
		builtin, err = ParseModulesBuiltin(f)
		f.Close()
		if err != nil {
			return nil, err
		}
	}
	order, err := md.LoadOrder(b.o.Modules, builtin)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	all, err := md.LoadOrder(append(append([]string(nil), b.o.Modules...), StagedModules...), builtin)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	loaded := map[string]bool{}
	for _, m := range order {
		loaded[m] = true
	}
	var staged strings.Builder
	for _, m := range all {
		if loaded[m] {
			continue
		}
		dst := path.Join("lib/modules", KernelRelease, m)
		if err := copyFile(filepath.Join(mdir, m), filepath.Join(stage, dst)); err != nil {
			return nil, err
		}
		staged.WriteString("/" + dst + "\n")
	}
	var list strings.Builder
	list.WriteString("# Kernel modules in load order, written by falconnic image build.\n")
	for _, m := range order {
		if !strings.HasSuffix(m, ".ko") {
			return nil, fmt.Errorf("image: module %s is compressed; uinit loads only plain .ko files", m)
		}
		dst := path.Join("lib/modules", KernelRelease, m)
		if err := copyFile(filepath.Join(mdir, m), filepath.Join(stage, dst)); err != nil {
			return nil, err
		}
		list.WriteString("/" + dst + "\n")
	}
	for _, e := range b.o.Extra {
		if e.Load {
			list.WriteString(e.Dst + "\n")
			order = append(order, e.Dst)
		}
	}
	for _, f := range []string{"modules.dep", "modules.builtin", "modules.order", "modules.alias", "modules.symbols"} {
		if _, err := os.Stat(filepath.Join(mdir, f)); err == nil {
			if err := copyFile(filepath.Join(mdir, f), filepath.Join(stage, "lib/modules", KernelRelease, f)); err != nil {
				return nil, err
			}
		}
	}
	if err := os.MkdirAll(filepath.Join(stage, "etc/falconnic"), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(stage, StagedList), []byte(staged.String()), 0o644); err != nil {
		return nil, err
	}
	return order, os.WriteFile(filepath.Join(stage, "etc/falconnic/modules"), []byte(list.String()), 0o644)
}

// debFiles lists the paths (relative, no leading "./") a .deb installs.
func debFiles(ctx context.Context, deb string) ([]string, error) {
	cmd := exec.CommandContext(ctx, "dpkg-deb", "--fsys-tarfile", deb)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	var files []string
	tr := tar.NewReader(out)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			return nil, fmt.Errorf("%s: %w", deb, err)
		}
		if h.Typeflag == tar.TypeReg || h.Typeflag == tar.TypeSymlink || h.Typeflag == tar.TypeLink {
			files = append(files, cleanRel(h.Name))
		}
	}
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("dpkg-deb --fsys-tarfile %s: %w", deb, err)
	}
	sort.Strings(files)
	return files, nil
}

// copyFile copies src's bytes (following links) to dst, keeping the mode.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	os.Remove(dst)
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fi.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// writeCPIO archives dir (newc, owned by root) into out.
func writeCPIO(ctx context.Context, dir, out string) error {
	var names []string
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel != "." {
			names = append(names, rel)
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(names)
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.CommandContext(ctx, "cpio", "--quiet", "-o", "-H", "newc", "-R", "0:0")
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(strings.Join(names, "\n") + "\n")
	cmd.Stdout = f
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("cpio: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// run runs a command in dir, returning its stderr in the error.
func run(ctx context.Context, dir, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		s := strings.TrimSpace(out.String())
		if len(s) > 2000 {
			s = "..." + s[len(s)-2000:]
		}
		return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, s)
	}
	return nil
}
