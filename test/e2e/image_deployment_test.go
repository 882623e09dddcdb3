package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	"sigs.k8s.io/yaml"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/hack/image"
	"github.com/muster-io/muster/localcluster"
)

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

// imageRunDeployment runs the shipped Deployment's containers from the
// image unpacked at rootfs and puts a JobSet through them.
func imageRunDeployment(t *testing.T, rootfs string) {
	ctx := t.Context()
	d, objs := imageDeployment(t)
	sched, pgr := imageContainers(t, d)

	ns := testNamespace(t, "image-")
	schedName := "image-" + ns
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	// The image's environment, not the test's (no KUBECONFIG, no proxy).
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home}

	schedHost := freePort(t)
	schedArgv, schedLease := imageSchedulerArgv(t, d, sched, objs, dir, rootfs, schedName, schedHost)
	pgrHost := freePort(t)
	pgrArgv, pgrLease := imagePodGrouperArgv(t, d, pgr, objs, dir, rootfs, schedName, pgrHost)

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

	imageRunGang(t, ns, schedName, procs[sched.Name])
	imageCheckObservers(t, rootfs, ns, schedHost, procs[pgr.Name])

	// Delete the JobSet: the PodGroup and the pods go with it.
	if err := controlPlane.Dynamic.Resource(jobsetsGVR).Namespace(ns).Delete(ctx, "train", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	catWaitCollected(t, ns, "jobset.sigs.k8s.io/jobset-name=train")

	// SIGTERM as the kubelet sends it: a clean exit hands the lease back,
	// so a standby takes over at once, not after the lease expires.
	leases := map[string][2]string{sched.Name: schedLease, pgr.Name: pgrLease}
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

// imageContainers returns the Deployment's two containers, checking that
// they run the image.
func imageContainers(t *testing.T, d *appsv1.Deployment) (sched, pgr corev1.Container) {
	containers := map[string]corev1.Container{}
	for _, c := range d.Spec.Template.Spec.Containers {
		repo, _, _ := strings.Cut(c.Image, ":")
		if repo != image.Repository {
			t.Errorf("container %s runs image %s, not %s", c.Name, c.Image, image.Repository)
		}
		containers[c.Name] = c
	}
	sched, pgr = containers["muster-scheduler"], containers["muster-podgrouper"]
	if len(sched.Command) == 0 || len(pgr.Command) == 0 {
		t.Fatalf("the Deployment's containers %v: want muster-scheduler and muster-podgrouper with a command", containers)
	}
	return sched, pgr
}

// imageSchedulerArgv is the scheduler's command line: its ConfigMap
// mounted, the kubeconfig instead of the in-cluster config, this test's
// scheduler name, the secure port on host port port. lease is the
// namespace and name of its leader election lease.
func imageSchedulerArgv(t *testing.T, d *appsv1.Deployment, sched corev1.Container, objs []*unstructured.Unstructured, dir, rootfs, schedName string, port int) (argv []string, lease [2]string) {
	kubeconfig := controlPlane.KubeconfigPath
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
		lease = [2]string{fmt.Sprint(le["resourceNamespace"]), fmt.Sprint(le["resourceName"])}
		conn["kubeconfig"] = kubeconfig
		profiles[0].(map[string]any)["schedulerName"] = schedName
		out, err := yaml.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return out
	})
	argv = append(imageArgv(sched, rootfs, hostPath),
		"--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(port))
	if len(sched.Ports) != 1 {
		t.Fatalf("muster-scheduler ports %v: want the secure port", sched.Ports)
	}
	return argv, lease
}

// imagePodGrouperArgv is the pod-grouper's command line: the kubeconfig,
// this test's scheduler name, host port port. lease is the namespace
// (created here) and name of its leader election lease.
func imagePodGrouperArgv(t *testing.T, d *appsv1.Deployment, pgr corev1.Container, objs []*unstructured.Unstructured, dir, rootfs, schedName string, port int) (argv []string, lease [2]string) {
	if len(pgr.Ports) != 1 {
		t.Fatalf("muster-podgrouper ports %v: want one", pgr.Ports)
	}
	argv = imageArgv(pgr, rootfs, imageMounts(t, d, pgr, objs, dir, nil))
	if want := fmt.Sprintf(":%d", pgr.Ports[0].ContainerPort); imageFlagValue(argv, "bind-address") != want {
		t.Fatalf("muster-podgrouper --bind-address %q, want %q (its container port)", imageFlagValue(argv, "bind-address"), want)
	}
	argv = imageSetFlag(t, argv, "bind-address", fmt.Sprintf("127.0.0.1:%d", port))
	argv = imageSetFlag(t, argv, "scheduler-name", schedName)
	argv = append(argv, "--kubeconfig="+controlPlane.KubeconfigPath)
	leaseNS := imageFlagValue(argv, "leader-elect-resource-namespace")
	if _, err := controlPlane.Client.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: leaseNS}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return argv, [2]string{leaseNS, imageFlagValue(argv, "leader-elect-resource-name")}
}

// imageRunGang puts the JobSet train of three 4-GPU members through the
// containers for schedName: grouped, held whole while only two fit, bound
// whole once a third node comes.
func imageRunGang(t *testing.T, ns, schedName string, schedProc *imageProcess) {
	ctx := t.Context()
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
		if err := schedProc.alive(); err != nil {
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
}

// imageCheckObservers checks the bound gang train in ns as a user sees it:
// the scheduler's metrics on schedHost, the image's CLI, the pod-grouper's
// log.
func imageCheckObservers(t *testing.T, rootfs, ns string, schedHost int, pgrProc *imageProcess) {
	// The barrier, seen from outside: the scheduler counts the gang's
	// quorum passing Permit (Prometheus scrapes this with a token).
	metrics := imageScrape(t, fmt.Sprintf("https://127.0.0.1:%d/metrics", schedHost), controlPlane.RestConfig.BearerToken)
	if v := imageMetric(metrics, `muster_gang_attempts_total{result="permitted"}`); v < 1 {
		t.Errorf("muster_gang_attempts_total{result=\"permitted\"} = %v, want ≥ 1:\n%s", v, imageGrep(metrics, "muster_gang_"))
	}
	t.Logf("the scheduler's gang metrics:\n%s", imageGrep(metrics, "muster_gang_attempts_total"))
	if v := imageMetric(metrics, `muster_gang_plan_duration_seconds_count{result="planned"}`); v < 1 {
		t.Errorf("muster_gang_plan_duration_seconds_count{result=\"planned\"} = %v, want ≥ 1", v)
	}
	// The GPU gauges follow the scheduler's informers, which may see the
	// last bind a moment after the API does: poll, then judge.
	var held, capacity float64
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		m := imageScrape(t, fmt.Sprintf("https://127.0.0.1:%d/metrics", schedHost), controlPlane.RestConfig.BearerToken)
		held, capacity = imageMetric(m, `muster_gang_gpus_allocated{in_gang="true"}`), imageMetric(m, "muster_gang_gpus_allocatable")
		return held >= 12 && capacity >= held, nil
	})
	if err != nil {
		t.Errorf("muster_gang_gpus_allocated{in_gang=\"true\"} = %v of muster_gang_gpus_allocatable %v, want ≥ 12 (the gang's 3 × 4 GPUs)", held, capacity)
	}

	// The image's CLI sees the same, through kubectl's plugin name.
	out, err := exec.CommandContext(t.Context(), filepath.Join(rootfs, "usr/local/bin/kubectl-muster"), "describe", "jobset/train", "-n", ns, "-o", "json", "--kubeconfig", controlPlane.KubeconfigPath).Output()
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
	if log, err := os.ReadFile(pgrProc.log); err != nil || !bytes.Contains(log, []byte(`"Starting muster-podgrouper" version="`+imageVersion+`"`)) {
		t.Errorf("the pod-grouper's log does not say it runs version %s (%v)", imageVersion, err)
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
