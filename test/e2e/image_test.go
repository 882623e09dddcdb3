package e2e

import (
	"archive/tar"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/muster-io/muster/hack/image"
	"github.com/muster-io/muster/test/manifestrender"
)

// The image, end to end: `make image` builds it (no Docker engine), the
// test reads it back from the OCI layout, checks what a runtime would read
// (config, platforms, labels), unpacks its filesystem, and runs the
// Deployment's two containers — their exact command lines from the
// rendered kustomize set, the binaries from the image — as child processes
// against the shared control plane. A JobSet made by the real JobSet
// operator is grouped by the image's pod-grouper and bound all or nothing by
// the image's scheduler.
//
// What differs from a pod, and why:
//   - the in-cluster config (a service account token at
//     /var/run/secrets/kubernetes.io/serviceaccount) is replaced by the
//     control plane's kubeconfig: --kubeconfig for the pod-grouper; for the
//     scheduler clientConnection.kubeconfig in its configuration (kube-
//     scheduler ignores --kubeconfig with --config) and the delegated
//     authentication and authorization kubeconfig flags;
//   - volumes are directories: the scheduler's ConfigMap is written into
//     the directory that stands for /etc/muster, and arguments naming a
//     mount path name that directory;
//   - the pod's network is the host's: each container port becomes a free
//     host port on 127.0.0.1 (kube-scheduler's --secure-port, the
//     pod-grouper's --bind-address);
//   - the scheduler name: the shared control plane's other tests own
//     muster-scheduler, so the profile and the pod-grouper's
//     --scheduler-name name this test's scheduler.

const (
	imageVersion = "v0.0.0-e2e"
	// imageEpoch is the fixed SOURCE_DATE_EPOCH of the test's builds.
	imageEpoch = 1767225600 // 2026-01-01T00:00:00Z
)

// TestImage: see the comment above.
func TestImage(t *testing.T) {
	begin := time.Now()
	const revision = "0000000000000000000000000000000000000e2e"
	out := filepath.Join(t.TempDir(), "bin")
	imageMake(t, out, revision, "")
	built := time.Since(begin)

	idx, err := image.ReadLayout(filepath.Join(out, "image", "oci"))
	if err != nil {
		t.Fatal(err)
	}
	digest, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("make image (linux/amd64 + linux/arm64) in %s: index %s", built.Round(time.Second), digest)
	want := image.Options{Version: imageVersion, Revision: revision}
	rootfs := map[string]string{}
	var amd64Digest v1.Hash
	for _, p := range image.Platforms {
		img, err := image.PlatformImage(idx, p)
		if err != nil {
			t.Fatal(err)
		}
		imageCheckConfig(t, img, p, want.Labels())
		rootfs[p.Architecture] = imageExtract(t, img, filepath.Join(t.TempDir(), "rootfs-"+p.Architecture))
		imageCheckBinaries(t, rootfs[p.Architecture], p)
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		if p.Architecture == "amd64" {
			amd64Digest = d
		}
		size, err := image.CompressedSize(img)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %s, layer %.1f MB compressed", image.PlatformString(p), d, float64(size)/1e6)
	}
	imageCheckArchives(t, filepath.Join(out, "image"), idx)

	// Built again, elsewhere, from the same source: the same image.
	// (amd64 only: the arm64 build is the same code path, at twice the cost.)
	again := time.Now()
	out2 := filepath.Join(t.TempDir(), "bin")
	imageMake(t, out2, revision, "linux/amd64")
	idx2, err := image.ReadLayout(filepath.Join(out2, "image", "oci"))
	if err != nil {
		t.Fatal(err)
	}
	img2, err := image.PlatformImage(idx2, v1.Platform{OS: "linux", Architecture: "amd64"})
	if err != nil {
		t.Fatal(err)
	}
	d2, err := img2.Digest()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("rebuilt linux/amd64 in %s: %s", time.Since(again).Round(time.Second), d2)
	if d2 != amd64Digest {
		img1, err := image.PlatformImage(idx, v1.Platform{OS: "linux", Architecture: "amd64"})
		if err != nil {
			t.Fatal(err)
		}
		// Say which files differ: a binary means its source changed
		// between the builds (or the build is not reproducible).
		a, b := imageFileDigests(t, img1), imageFileDigests(t, img2)
		var differ []string
		for f := range a {
			if a[f] != b[f] {
				differ = append(differ, f)
			}
		}
		sort.Strings(differ)
		t.Errorf("two builds of the same source: linux/amd64 digests %s and %s; files that differ: %v", amd64Digest, d2, differ)
	}

	// The binaries of this machine's architecture run.
	host, ok := rootfs[runtime.GOARCH]
	if !ok {
		t.Fatalf("the image has no %s binaries to run here", runtime.GOARCH)
	}
	imageCheckStamps(t, host)
	imageRunDeployment(t, host)
	t.Logf("TestImage took %s", time.Since(begin).Round(time.Second))
}

// imageMake runs `make image` with the test's version, revision and time,
// writing to bin/image under out. platforms, if set, is IMAGE_PLATFORMS.
func imageMake(t *testing.T, out, revision, platforms string) {
	t.Helper()
	args := []string{"-C", pgrRepoRoot(), "--no-print-directory", "image", "BIN=" + out,
		"VERSION=" + imageVersion, "REVISION=" + revision, "SOURCE_DATE_EPOCH=" + strconv.Itoa(imageEpoch)}
	if platforms != "" {
		args = append(args, "IMAGE_PLATFORMS="+platforms)
	}
	cmd := exec.CommandContext(t.Context(), "make", args...)
	// A make test above this one passes its jobserver down; this make is
	// a separate build.
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "MAKEFLAGS" && k != "MFLAGS" && k != "MAKELEVEL" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make %s: %v\n%s", strings.Join(args, " "), err, b)
	}
}

// imageCheckConfig checks what a runtime reads from an image: its
// platform, user, entrypoint, working directory, labels, OCI media types.
func imageCheckConfig(t *testing.T, img v1.Image, p v1.Platform, labels map[string]string) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	what := image.PlatformString(p)
	if cf.OS != p.OS || cf.Architecture != p.Architecture {
		t.Errorf("%s: config says %s/%s", what, cf.OS, cf.Architecture)
	}
	if !cf.Created.Time.Equal(time.Unix(imageEpoch, 0)) {
		t.Errorf("%s: created %s, want SOURCE_DATE_EPOCH", what, cf.Created.Time)
	}
	c := cf.Config
	if c.User != "65532:65532" || !reflect.DeepEqual(c.Entrypoint, []string{"/usr/local/bin/muster-scheduler"}) || c.WorkingDir != "/home/nonroot" {
		t.Errorf("%s: user %q entrypoint %q workdir %q", what, c.User, c.Entrypoint, c.WorkingDir)
	}
	if !reflect.DeepEqual(c.Labels, labels) {
		t.Errorf("%s: labels %v, want %v", what, c.Labels, labels)
	}
	for _, l := range []string{"org.opencontainers.image.source", "org.opencontainers.image.version", "org.opencontainers.image.licenses", "org.opencontainers.image.revision"} {
		if c.Labels[l] == "" {
			t.Errorf("%s: no label %s", what, l)
		}
	}
	mt, err := img.MediaType()
	if err != nil {
		t.Fatal(err)
	}
	if mt != types.OCIManifestSchema1 {
		t.Errorf("%s: manifest media type %s", what, mt)
	}
}

// imageExtract unpacks img's filesystem into dir, as a runtime would
// (regular files, directories, hard links; nothing else is expected), and
// returns dir.
func imageExtract(t *testing.T, img v1.Image, dir string) string {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return dir
		}
		if err != nil {
			t.Fatal(err)
		}
		name := path.Clean("/" + h.Name)
		target := filepath.Join(dir, filepath.FromSlash(name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(target, 0o755)
		case tar.TypeReg:
			err = imageWriteFile(target, tr, os.FileMode(h.Mode).Perm())
		case tar.TypeLink:
			err = os.Link(filepath.Join(dir, filepath.FromSlash(path.Clean("/"+h.Linkname))), target)
		default:
			err = fmt.Errorf("unexpected entry type %c", h.Typeflag)
		}
		if err != nil {
			t.Fatalf("extracting %s: %v", h.Name, err)
		}
	}
}

// imageFileDigests hashes every regular file of img's filesystem.
func imageFileDigests(t *testing.T, img v1.Image) map[string]string {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		sum := sha256.New()
		if _, err := io.Copy(sum, tr); err != nil {
			t.Fatal(err)
		}
		out[h.Name] = hex.EncodeToString(sum.Sum(nil))
	}
}

func imageWriteFile(target string, r io.Reader, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// imageCheckBinaries: every shipped binary is where the manifests run it,
// a static executable of p's architecture, built as the image recipe says
// (CGO off, -trimpath, the version stamped); kubectl-muster is the CLI.
func imageCheckBinaries(t *testing.T, rootfs string, p v1.Platform) {
	t.Helper()
	machine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[p.Architecture]
	for _, b := range image.Binaries {
		file := filepath.Join(rootfs, b.Path)
		if b.Link != "" {
			a, errA := os.Stat(file)
			l, errL := os.Stat(filepath.Join(rootfs, b.Link))
			if errA != nil || errL != nil || !os.SameFile(a, l) {
				t.Errorf("%s: %s is not a link to %s (%v, %v)", p.Architecture, b.Path, b.Link, errA, errL)
			}
			continue
		}
		f, err := elf.Open(file)
		if err != nil {
			t.Fatalf("%s: %v", b.Path, err)
		}
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP {
				t.Errorf("%s (%s): dynamically linked (has an interpreter): the image has no libc", b.Path, p.Architecture)
			}
		}
		if f.Machine != machine {
			t.Errorf("%s (%s): ELF machine %s, want %s", b.Path, p.Architecture, f.Machine, machine)
		}
		f.Close()
		bi, err := buildinfo.ReadFile(file)
		if err != nil {
			t.Fatalf("%s: %v", b.Path, err)
		}
		settings := map[string]string{}
		for _, s := range bi.Settings {
			settings[s.Key] = s.Value
		}
		// (-trimpath keeps -ldflags out of the build info: the version
		// stamps are checked by running the binaries.)
		if settings["CGO_ENABLED"] != "0" || settings["GOOS"] != p.OS || settings["GOARCH"] != p.Architecture || settings["-trimpath"] != "true" ||
			bi.Path != "github.com/muster-io/muster/cmd/"+path.Base(b.Package) {
			t.Errorf("%s (%s): built as %s with %v", b.Path, p.Architecture, bi.Path, settings)
		}
	}
	passwd, err := os.ReadFile(filepath.Join(rootfs, "etc", "passwd"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(passwd), "nonroot:x:65532:65532:") {
		t.Errorf("%s: /etc/passwd has no nonroot 65532:\n%s", p.Architecture, passwd)
	}
}

// imageCheckStamps: the Makefile's ldflags reached the binaries — the
// muster version (the CLI says it; the pod-grouper logs it when it starts,
// checked in imageRunDeployment) and the Kubernetes version kube-scheduler
// reports (unstamped it says v0.0.0-master).
func imageCheckStamps(t *testing.T, rootfs string) {
	t.Helper()
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{"usr/local/bin/muster", "version", "--client", "-o", "json"}, `"` + imageVersion + `"`},
		{[]string{"usr/local/bin/kubectl-muster", "version", "--client", "-o", "json"}, `"` + imageVersion + `"`},
		{[]string{"usr/local/bin/muster-scheduler", "--version"}, "Kubernetes " + manifestrender.KubeVersion},
	} {
		out, err := exec.CommandContext(t.Context(), filepath.Join(rootfs, tc.argv[0]), tc.argv[1:]...).Output()
		if err != nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("%s: %q (%v %s), want %s", strings.Join(tc.argv, " "), out, err, imageStderr(err), tc.want)
		}
	}
}

// imageCheckArchives: the docker-load archive of each platform holds that
// platform's image under the version tag, and the OCI archive is there.
func imageCheckArchives(t *testing.T, dir string, idx v1.ImageIndex) {
	t.Helper()
	tag, err := image.Options{Version: imageVersion}.Tag()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range image.Platforms {
		file := filepath.Join(dir, fmt.Sprintf("muster-%s-%s.tar", p.OS, p.Architecture))
		fromArchive, err := tarball.ImageFromPath(file, &tag)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		fromIndex, err := image.PlatformImage(idx, p)
		if err != nil {
			t.Fatal(err)
		}
		a, errA := fromArchive.ConfigName()
		b, errB := fromIndex.ConfigName()
		if errA != nil || errB != nil || a != b {
			t.Errorf("%s: image %s (%v), the index's %s image %s (%v)", file, a, errA, image.PlatformString(p), b, errB)
		}
		imageLogSize(t, file)
	}
	imageLogSize(t, filepath.Join(dir, "muster-oci.tar"))
}

func imageLogSize(t *testing.T, file string) {
	t.Helper()
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %.1f MB", filepath.Base(file), float64(fi.Size())/1e6)
}
