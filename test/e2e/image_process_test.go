package e2e

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

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
