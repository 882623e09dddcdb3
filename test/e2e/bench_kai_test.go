package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// KAI Scheduler as a benchmark peer (variantKAI). Its source is a snapshot
// beside the repository (../shared/kai-scheduler, Apache-2.0), built in its
// own module with its own dependencies into the user cache, never linked
// into muster; its scheduler and binder run as child processes against the
// in-process control plane, as muster-scheduler does in scenario 1b. Only
// the benchmarks use it: without the snapshot the variant fails and says
// where it looked.
const (
	variantKAI     = "kai"
	kaiQueue       = "default-queue"
	kaiParentQueue = "default-parent-queue"
	// kaiPodGroupAnnotation names a pod's PodGroup (KAI's
	// constants.PodGroupAnnotationForPod); kaiQueueLabel its queue.
	kaiPodGroupAnnotation = "pod-group-name"
	kaiQueueLabel         = "kai.scheduler/queue"
)

var (
	kaiPodGroups = schema.GroupVersionResource{Group: "scheduling.run.ai", Version: "v2alpha2", Resource: "podgroups"}
	kaiQueues    = schema.GroupVersionResource{Group: "scheduling.run.ai", Version: "v2", Resource: "queues"}
)

// kaiSource is the KAI snapshot: MUSTER_KAI_SOURCE, or ../shared/kai-scheduler
// from the repository root.
func kaiSource() (string, error) {
	dir := os.Getenv("MUSTER_KAI_SOURCE")
	if dir == "" {
		root, err := filepath.Abs(filepath.Join("..", ".."))
		if err != nil {
			return "", err
		}
		dir = filepath.Join(filepath.Dir(root), "shared", "kai-scheduler")
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return "", fmt.Errorf("KAI Scheduler source not found (set MUSTER_KAI_SOURCE): %w", err)
	}
	return dir, nil
}

var kaiBuild struct {
	once sync.Once
	dir  string
	err  error
}

// kaiBinaries builds KAI's scheduler and binder once per source (keyed by
// its go.mod and go.sum), into the user cache: about 12 minutes cold on
// this machine, seconds after.
func kaiBinaries(ctx context.Context) (string, error) {
	kaiBuild.once.Do(func() {
		kaiBuild.dir, kaiBuild.err = buildKAI(ctx)
	})
	return kaiBuild.dir, kaiBuild.err
}

func buildKAI(ctx context.Context) (string, error) {
	src, err := kaiSource()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum"} {
		data, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			return "", err
		}
		h.Write(data)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "muster", "kai-"+hex.EncodeToString(h.Sum(nil))[:16])
	if kaiBuilt(dir) {
		return dir, nil
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "kai-build-")
	if err != nil {
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return "", err
		}
		if tmp, err = os.MkdirTemp(filepath.Dir(dir), "kai-build-"); err != nil {
			return "", err
		}
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", tmp+"/", "./cmd/scheduler", "./cmd/binder")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building KAI Scheduler in %s: %w\n%s", src, err, out)
	}
	if err := os.Rename(tmp, dir); err != nil && !kaiBuilt(dir) {
		return "", err
	}
	return dir, nil
}

func kaiBuilt(dir string) bool {
	for _, b := range []string{"scheduler", "binder"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return false
		}
	}
	return true
}

var kaiSetup struct {
	once sync.Once
	err  error
}

// setupKAI installs KAI's CRDs from its chart, once per process.
func setupKAI(ctx context.Context) error {
	kaiSetup.once.Do(func() {
		src, err := kaiSource()
		if err != nil {
			kaiSetup.err = err
			return
		}
		// KAI's service namespace (--namespace), where it keeps its own
		// objects.
		if _, err := controlPlane.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kai-scheduler"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			kaiSetup.err = err
			return
		}
		crds := filepath.Join(src, "deployments", "kai-scheduler", "crds")
		for _, f := range []string{"scheduling.run.ai_podgroups.yaml", "scheduling.run.ai_queues.yaml", "scheduling.run.ai_bindrequests.yaml", "kai.scheduler_topologies.yaml"} {
			if err := controlPlane.InstallCRDFile(ctx, filepath.Join(crds, f)); err != nil {
				kaiSetup.err = fmt.Errorf("KAI CRD %s: %w", f, err)
				return
			}
		}
	})
	return kaiSetup.err
}

// createKAIQueues (re)creates the default queues, KAI's chart's parent and
// leaf, with a GPU quota of the run's GPUs and no limit on CPU or memory.
func createKAIQueues(ctx context.Context, gpus int) error {
	dc := controlPlane.Dynamic
	res := func(gpuQuota int) map[string]any {
		unlimited := map[string]any{"quota": int64(-1), "limit": int64(-1), "overQuotaWeight": int64(1)}
		return map[string]any{"cpu": unlimited, "memory": unlimited,
			"gpu": map[string]any{"quota": int64(gpuQuota), "limit": int64(-1), "overQuotaWeight": int64(1)}}
	}
	for _, q := range []struct {
		name, parent string
	}{{kaiParentQueue, ""}, {kaiQueue, kaiParentQueue}} {
		spec := map[string]any{"resources": res(gpus)}
		if q.parent != "" {
			spec["parentQueue"] = q.parent
		}
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "scheduling.run.ai/v2", "kind": "Queue",
			"metadata": map[string]any{"name": q.name}, "spec": spec,
		}}
		ri := dc.Resource(kaiQueues)
		if err := ri.Delete(ctx, q.name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if _, err := ri.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("KAI queue %s: %w", q.name, err)
		}
	}
	return nil
}

// createKAIPodGroups writes one KAI PodGroup per gang, in the leaf queue.
func createKAIPodGroups(ctx context.Context, ns string, gangs []string, size int) error {
	ri := controlPlane.Dynamic.Resource(kaiPodGroups).Namespace(ns)
	return parallel(len(gangs), 16, func(i int) error {
		_, err := ri.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
			"metadata": map[string]any{"name": gangs[i]},
			"spec":     map[string]any{"minMember": int64(size), "queue": kaiQueue},
		}}, metav1.CreateOptions{})
		return err
	})
}

// startKAI runs KAI's binder and scheduler for pods naming sched, with the
// client limits every variant of 1b gets, and returns them (scheduler
// first). The scheduling period is KAI's default (1 s); the binder's
// concurrency is its scale test's (100 workers).
func startKAI(b testing.TB, bin, sched string) []*exec.Cmd {
	qps := envInt("MUSTER_BENCH_SB_QPS", 1000)
	env := []string{"KUBECONFIG=" + controlPlane.KubeconfigPath}
	binder := startBinaryEnv(b, env, filepath.Join(bin, "binder"),
		"--scheduler-name="+sched, "--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--qps="+strconv.Itoa(qps), "--burst="+strconv.Itoa(2*qps), "--max-concurrent-reconciles=100")
	scheduler := startBinaryEnv(b, env, filepath.Join(bin, "scheduler"),
		"--scheduler-name="+sched, "--listen-address=127.0.0.1:"+strconv.Itoa(freePort(b)),
		"--plugin-server-port="+strconv.Itoa(freePort(b)),
		"--qps="+strconv.Itoa(qps), "--burst="+strconv.Itoa(2*qps))
	return []*exec.Cmd{scheduler, binder}
}

// prepareKAI readies a 1b run of variantKAI in ns: CRDs, queues with the
// run's GPUs, one PodGroup per gang.
func prepareKAI(ctx context.Context, ns string, gangs []string, size, gpus int) error {
	if err := setupKAI(ctx); err != nil {
		return err
	}
	if err := createKAIQueues(ctx, gpus); err != nil {
		return err
	}
	return createKAIPodGroups(ctx, ns, gangs, size)
}
