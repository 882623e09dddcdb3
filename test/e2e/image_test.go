package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	"sigs.k8s.io/yaml"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/hack/image"
	"github.com/muster-io/muster/localcluster"
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

// imageDeployment returns the rendered kustomize set's Deployment and
// its objects.
func imageDeployment(t *testing.T) (*appsv1.Deployment, []*unstructured.Unstructured) {
	t.Helper()
	d, objs, err := shippedDeployment()
	if err != nil {
		t.Fatal(err)
	}
	return d, objs
}

// imageProcess is one container of the Deployment running as a child
// process.
type imageProcess struct {
	name   string
	cmd    *exec.Cmd
	log    string
	ports  map[int32]int // container port -> host port
	exited chan struct{}
	err    error
}

// logTail is the end of the process's output.
func (p *imageProcess) logTail() string {
	data, err := os.ReadFile(p.log)
	if err != nil {
		return err.Error()
	}
	if len(data) > 6000 {
		data = data[len(data)-6000:]
	}
	return string(data)
}

// alive returns an error, with the log tail, once the process has exited.
func (p *imageProcess) alive() error {
	select {
	case <-p.exited:
		return fmt.Errorf("%s exited: %v\n%s", p.name, p.err, p.logTail())
	default:
		return nil
	}
}

// stop sends SIGTERM, as the kubelet does, and waits up to the pod's
// grace period. It returns true for a clean exit (status 0) and false when
// the signal killed the process (no handler); anything else fails t.
func (p *imageProcess) stop(t *testing.T) (clean bool) {
	t.Helper()
	select {
	case <-p.exited:
		t.Errorf("%s had exited before it was stopped: %v\n%s", p.name, p.err, p.logTail())
		return false
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Error(err)
	}
	select {
	case <-p.exited:
		if p.err == nil {
			return true
		}
		var ee *exec.ExitError
		if errors.As(p.err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM {
				return false
			}
		}
		t.Errorf("%s on SIGTERM: %v\n%s", p.name, p.err, p.logTail())
	case <-time.After(30 * time.Second):
		t.Errorf("%s still running 30s after SIGTERM (the pod's grace period)\n%s", p.name, p.logTail())
	}
	return false
}

// imageStart starts argv with env, its output in dir/<name>.log. A
// process still running when t ends is killed.
func imageStart(t *testing.T, name string, argv, env []string, ports map[int32]int, dir string) *imageProcess {
	t.Helper()
	p := &imageProcess{name: name, log: filepath.Join(dir, name+".log"), ports: ports, exited: make(chan struct{})}
	logf, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		logf.Close()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			if err := p.cmd.Process.Kill(); err != nil {
				t.Error(err)
			}
			<-p.exited
		}
		if t.Failed() {
			t.Logf("%s log (tail):\n%s", name, p.logTail())
		}
	})
	return p
}

// imageSetFlag replaces the value of --flag in args; the flag must be there
// once, in --flag=value form.
func imageSetFlag(t *testing.T, args []string, flag, value string) []string {
	t.Helper()
	out := append([]string(nil), args...)
	n := 0
	for i, a := range out {
		if strings.HasPrefix(a, "--"+flag+"=") {
			out[i] = "--" + flag + "=" + value
			n++
		}
	}
	if n != 1 {
		t.Fatalf("the Deployment's args %v: --%s appears %d times, want once", args, flag, n)
	}
	return out
}

// imageFlagValue is the value of --flag=value in args.
func imageFlagValue(args []string, flag string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+flag+"="); ok {
			return v
		}
	}
	return ""
}

// imageMounts makes a directory per volume mount of c under dir, writes
// ConfigMap volumes' data into theirs (edit may change a file), and
// returns a function mapping a path inside the container to the host.
// edit may be nil.
func imageMounts(t *testing.T, d *appsv1.Deployment, c corev1.Container, objs []*unstructured.Unstructured, dir string, edit func(file string, data []byte) []byte) func(string) string {
	t.Helper()
	volumes := map[string]corev1.Volume{}
	for _, v := range d.Spec.Template.Spec.Volumes {
		volumes[v.Name] = v
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		host := filepath.Join(dir, c.Name, m.Name)
		if err := os.MkdirAll(host, 0o755); err != nil {
			t.Fatal(err)
		}
		mounts[m.MountPath] = host
		v, ok := volumes[m.Name]
		if !ok {
			t.Fatalf("container %s mounts volume %s, which the pod does not have", c.Name, m.Name)
		}
		if v.ConfigMap == nil {
			continue // a token (replaced by the kubeconfig) or an emptyDir
		}
		var data map[string]string
		for _, o := range objs {
			if o.GetKind() == "ConfigMap" && o.GetName() == v.ConfigMap.Name {
				data, _, _ = unstructured.NestedStringMap(o.Object, "data")
			}
		}
		if len(data) == 0 {
			t.Fatalf("volume %s: ConfigMap %s is not in the kustomize set, or empty", m.Name, v.ConfigMap.Name)
		}
		for file, content := range data {
			b := []byte(content)
			if edit != nil {
				b = edit(file, b)
			}
			if err := os.WriteFile(filepath.Join(host, file), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return func(p string) string {
		for mp, host := range mounts {
			if rest, ok := strings.CutPrefix(p, mp+"/"); ok {
				return filepath.Join(host, rest)
			}
		}
		return p
	}
}

// imageArgv is the container's command line with the image's root
// at rootfs and arguments that name a mounted path pointing at its host
// directory.
func imageArgv(c corev1.Container, rootfs string, hostPath func(string) string) []string {
	argv := []string{filepath.Join(rootfs, c.Command[0])}
	for _, a := range append(append([]string(nil), c.Command[1:]...), c.Args...) {
		if flag, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(flag, "--") {
			a = flag + "=" + hostPath(v)
		}
		argv = append(argv, a)
	}
	return argv
}

// imageProbeURL is the URL of an HTTP probe of c on the host.
func imageProbeURL(t *testing.T, c corev1.Container, p *imageProcess, probe *corev1.Probe) string {
	t.Helper()
	g := probe.HTTPGet
	port := g.Port.IntVal
	if g.Port.StrVal != "" {
		for _, cp := range c.Ports {
			if cp.Name == g.Port.StrVal {
				port = cp.ContainerPort
			}
		}
	}
	host, ok := p.ports[port]
	if !ok {
		t.Fatalf("container %s probes port %s, which it does not declare", c.Name, g.Port.String())
	}
	scheme := "http" // the API's default
	if g.Scheme != "" {
		scheme = strings.ToLower(string(g.Scheme))
	}
	return fmt.Sprintf("%s://127.0.0.1:%d%s", scheme, host, g.Path)
}

// imageHTTP calls the components' serving ports: the scheduler's
// certificate is self-signed, and the kubelet does not verify probe
// certificates either.
var imageHTTP = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}

// imageWaitProbes waits until every HTTP probe of c (startup, liveness,
// readiness) answers 200.
func imageWaitProbes(t *testing.T, c corev1.Container, p *imageProcess) {
	t.Helper()
	for _, probe := range []*corev1.Probe{c.StartupProbe, c.LivenessProbe, c.ReadinessProbe} {
		if probe == nil || probe.HTTPGet == nil {
			continue
		}
		url := imageProbeURL(t, c, p, probe)
		waitFor(t, 2*time.Minute, c.Name+" probe "+url, func(ctx context.Context) (bool, string, error) {
			if err := p.alive(); err != nil {
				return false, "", err
			}
			resp, err := imageHTTP.Get(url)
			if err != nil {
				return false, err.Error(), nil
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK, resp.Status, nil
		})
	}
}

// imageRunDeployment runs the shipped Deployment's containers from the
// image unpacked at rootfs and puts a JobSet through them.
func imageRunDeployment(t *testing.T, rootfs string) {
	ctx := t.Context()
	d, objs := imageDeployment(t)
	containers := map[string]corev1.Container{}
	for _, c := range d.Spec.Template.Spec.Containers {
		repo, _, _ := strings.Cut(c.Image, ":")
		if repo != image.Repository {
			t.Errorf("container %s runs image %s, not %s", c.Name, c.Image, image.Repository)
		}
		containers[c.Name] = c
	}
	sched, pgr := containers["muster-scheduler"], containers["muster-podgrouper"]
	if len(sched.Command) == 0 || len(pgr.Command) == 0 {
		t.Fatalf("the Deployment's containers %v: want muster-scheduler and muster-podgrouper with a command", containers)
	}

	ns := testNamespace(t, "image-")
	schedName := "image-" + ns
	kubeconfig := controlPlane.KubeconfigPath
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	// The image's environment, not the test's (no KUBECONFIG, no proxy).
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home}

	// The scheduler: its ConfigMap mounted, the kubeconfig instead of the
	// in-cluster config, this test's scheduler name.
	schedHost := freePort(t)
	var schedLeaseNS, schedLeaseName string
	hostPath := imageMounts(t, d, sched, objs, dir, func(file string, data []byte) []byte {
		var cfg map[string]any
		if err := yaml.Unmarshal(data, &cfg); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		conn, _ := cfg["clientConnection"].(map[string]any)
		profiles, _ := cfg["profiles"].([]any)
		if conn == nil || len(profiles) != 1 {
			t.Fatalf("%s: want clientConnection and one profile:\n%s", file, data)
		}
		le, _ := cfg["leaderElection"].(map[string]any)
		if le == nil || le["leaderElect"] != true {
			t.Fatalf("%s: leader election is off: %v", file, le)
		}
		schedLeaseNS, schedLeaseName = fmt.Sprint(le["resourceNamespace"]), fmt.Sprint(le["resourceName"])
		conn["kubeconfig"] = kubeconfig
		profiles[0].(map[string]any)["schedulerName"] = schedName
		out, err := yaml.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return out
	})
	schedArgv := append(imageArgv(sched, rootfs, hostPath),
		"--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(schedHost))
	if len(sched.Ports) != 1 {
		t.Fatalf("muster-scheduler ports %v: want the secure port", sched.Ports)
	}

	// The pod-grouper: the kubeconfig, this test's scheduler name, a host port.
	pgrHost := freePort(t)
	if len(pgr.Ports) != 1 {
		t.Fatalf("muster-podgrouper ports %v: want one", pgr.Ports)
	}
	pgrArgv := imageArgv(pgr, rootfs, imageMounts(t, d, pgr, objs, dir, nil))
	if want := fmt.Sprintf(":%d", pgr.Ports[0].ContainerPort); imageFlagValue(pgrArgv, "bind-address") != want {
		t.Fatalf("muster-podgrouper --bind-address %q, want %q (its container port)", imageFlagValue(pgrArgv, "bind-address"), want)
	}
	pgrArgv = imageSetFlag(t, pgrArgv, "bind-address", fmt.Sprintf("127.0.0.1:%d", pgrHost))
	pgrArgv = imageSetFlag(t, pgrArgv, "scheduler-name", schedName)
	pgrArgv = append(pgrArgv, "--kubeconfig="+kubeconfig)
	leaseNS := imageFlagValue(pgrArgv, "leader-elect-resource-namespace")
	if _, err := controlPlane.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: leaseNS}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}

	// Two of the three 4-GPU members fit on the pool at first.
	testPool(t, ns, 2, func(int) localcluster.NodeSpec { return localcluster.NodeSpec{GPUs: 4} })
	startOperator(t, "jobset")
	started := time.Now()
	procs := map[string]*imageProcess{
		sched.Name: imageStart(t, sched.Name, schedArgv, env, map[int32]int{sched.Ports[0].ContainerPort: schedHost}, dir),
		pgr.Name:   imageStart(t, pgr.Name, pgrArgv, env, map[int32]int{pgr.Ports[0].ContainerPort: pgrHost}, dir),
	}
	t.Logf("muster-scheduler: %s", strings.Join(schedArgv, " "))
	t.Logf("muster-podgrouper: %s", strings.Join(pgrArgv, " "))
	for _, c := range []corev1.Container{sched, pgr} {
		imageWaitProbes(t, c, procs[c.Name])
	}
	t.Logf("both containers ready (every probe 200) in %s", time.Since(started).Round(time.Millisecond))

	// The scheduler runs out of process: the partial-binding watcher has
	// no barrier record of it (as for native gangs); the end state and
	// the scheduler's own metrics stand in.
	w := startWatcher(t, &partialWatcher{ns: ns, label: api.LabelPodGroup, strict: true, gangs: map[string]gangWatch{"train": {min: 3, native: true}}})
	js := applyYAML(t, ns, jobSetYAML("train", ns, schedName))[0]
	sel := "jobset.sigs.k8s.io/jobset-name=train"
	pg := pgrWaitPodGroup(t, ns, "train", "minMember 3, 12 GPUs", func(pg *schedv1alpha1.PodGroup) bool {
		return pg.Spec.MinMember == 3 && catGPUs(pg) == 12
	})
	if len(pg.OwnerReferences) != 1 || pg.OwnerReferences[0].UID != js.GetUID() || !ptr.Deref(pg.OwnerReferences[0].Controller, false) {
		t.Errorf("PodGroup owners %+v, want the JobSet", pg.OwnerReferences)
	}
	pgrWaitPods(t, ns, sel, 3, "in PodGroup train", pgrInGroup("train"))

	// Room for 8 GPUs: the scheduler says why, and binds none.
	reason := []string{"gang " + ns + "/train", "needs 12 nvidia.com/gpu", "best placement fits 2 of 3 members"}
	waitEvent(t, ns, "PodGroup", "train", "GangUnschedulable", reason)
	catWaitMembersUnschedulable(t, ns, sel, 3, reason)
	holdsFor(t, 3*time.Second, "no member of train bound while only 2 of 3 fit", func(ctx context.Context) (bool, string, error) {
		if err := procs[sched.Name].alive(); err != nil {
			return false, "", err
		}
		bound, err := boundPods(ctx, ns, api.LabelPodGroup)
		return len(bound["train"]) == 0, fmt.Sprintf("%d bound", len(bound["train"])), err
	})

	// A third node: the whole gang binds.
	room := time.Now()
	if _, err := controlPlane.CreateNodes(ctx, 1, func(int) localcluster.NodeSpec {
		return localcluster.NodeSpec{Name: ns + "-2", Pool: ns, GPUs: 4}
	}); err != nil {
		t.Fatal(err)
	}
	pods, err := controlPlane.WaitPodsBound(ctx, ns, sel, 3, gangTimeout)
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]bool{}
	for _, p := range pods {
		nodes[p.Spec.NodeName] = true
	}
	t.Logf("room for the gang → 3 members bound on %d nodes in %s", len(nodes), time.Since(room).Round(time.Millisecond))
	w.check(t)

	// The barrier, seen from outside: the scheduler counts the gang's
	// quorum passing Permit (Prometheus scrapes this with a token).
	metrics := imageScrape(t, fmt.Sprintf("https://127.0.0.1:%d/metrics", schedHost), controlPlane.RestConfig.BearerToken)
	if v := imageMetric(metrics, `muster_gang_attempts_total{result="permitted"}`); v < 1 {
		t.Errorf("muster_gang_attempts_total{result=\"permitted\"} = %v, want ≥ 1:\n%s", v, imageGrep(metrics, "muster_gang_"))
	}
	t.Logf("the scheduler's gang metrics:\n%s", imageGrep(metrics, "muster_gang_attempts_total"))

	// The image's CLI sees the same, through kubectl's plugin name.
	out, err := exec.CommandContext(ctx, filepath.Join(rootfs, "usr/local/bin/kubectl-muster"), "describe", "jobset/train", "-n", ns, "-o", "json", "--kubeconfig", kubeconfig).Output()
	if err != nil {
		t.Fatalf("kubectl-muster describe: %v\n%s", err, imageStderr(err))
	}
	var view struct {
		Gangs []struct {
			Name      string `json:"name"`
			MinMember int    `json:"minMember"`
			Bound     int    `json:"bound"`
		} `json:"gangs"`
	}
	if err := json.Unmarshal(out, &view); err != nil {
		t.Fatalf("kubectl-muster describe -o json: %v\n%s", err, out)
	}
	if len(view.Gangs) != 1 || view.Gangs[0].Name != "train" || view.Gangs[0].MinMember != 3 || view.Gangs[0].Bound != 3 {
		t.Errorf("kubectl-muster describe: gangs %+v, want train 3/3 bound", view.Gangs)
	}
	if log, err := os.ReadFile(procs[pgr.Name].log); err != nil || !bytes.Contains(log, []byte(`"Starting muster-podgrouper" version="`+imageVersion+`"`)) {
		t.Errorf("the pod-grouper's log does not say it runs version %s (%v)", imageVersion, err)
	}

	// Delete the JobSet: the PodGroup and the pods go with it.
	if err := controlPlane.Dynamic.Resource(jobsetsGVR).Namespace(ns).Delete(ctx, "train", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	catWaitCollected(t, ns, sel)

	// SIGTERM as the kubelet sends it: a clean exit hands the lease back,
	// so a standby takes over at once, not after the lease expires.
	leases := map[string][2]string{
		sched.Name: {schedLeaseNS, schedLeaseName},
		pgr.Name:   {leaseNS, imageFlagValue(pgrArgv, "leader-elect-resource-name")},
	}
	for _, c := range []corev1.Container{pgr, sched} {
		if !procs[c.Name].stop(t) {
			t.Errorf("%s: killed by SIGTERM, want a clean exit", c.Name)
			continue
		}
		l := leases[c.Name]
		lease, err := controlPlane.Client.CoordinationV1().Leases(l[0]).Get(ctx, l[1], metav1.GetOptions{})
		if err != nil {
			t.Errorf("lease %s/%s: %v (was leader election on?)", l[0], l[1], err)
			continue
		}
		if h := ptr.Deref(lease.Spec.HolderIdentity, ""); h != "" {
			t.Errorf("lease %s/%s still held by %s after %s exited", l[0], l[1], h, c.Name)
		}
	}
}

// imageScrape GETs a metrics endpoint with a bearer token.
func imageScrape(t *testing.T, url, token string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := imageHTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s\n%s", url, resp.Status, body)
	}
	return string(body)
}

// imageMetric is the value of the sample named series (name{labels}) in
// Prometheus text, 0 when absent.
func imageMetric(text, series string) float64 {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return f
			}
		}
	}
	return 0
}

func imageGrep(text, prefix string) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, prefix) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// imageStderr is the stderr an exec.ExitError kept.
func imageStderr(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(ee.Stderr)
	}
	return ""
}
