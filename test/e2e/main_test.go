// Package e2e holds muster's integration tests: one test binary, one
// in-process control plane (etcd, kube-apiserver, the pod-creating
// controllers, the pod-status simulator and a default-profile scheduler)
// shared by every test. Linking the control plane costs about a minute, so
// new integration tests go into this package rather than a new one.
//
// Conventions for tests here:
//   - Put your objects in a namespace of your own (testNamespace).
//   - Nodes are cluster-wide: create them in a pool (localcluster.NodeSpec.Pool)
//     and give your pods localcluster.PoolPlacement, so tests do not land on each
//     other's nodes. Delete the pool's nodes in t.Cleanup.
//   - A scheduler name is served by one scheduler at a time. The shared one
//     is "default-scheduler"; start your own profiles under other names.
//   - CRDs your tests need at start go in through registerSetup (from an
//     init function), so they exist before the garbage collector starts and
//     before the 2-second first-CR delay could bite.
//   - Every API error fails the test. Wait with waitFor (a
//     localcluster.Condition, e.g. objectIs, gangsBound); assert that
//     something never happens during a period with holdsFor
//     (localcluster.Consistently), never with a sleep and one look.
package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"

	"github.com/muster-io/muster/localcluster"
	"github.com/muster-io/muster/test/manifestrender"
)

var (
	// controlPlane is the control plane shared by every test of the binary.
	controlPlane *localcluster.ControlPlane
	// podSim plays kubelet: bound pods become Running and Ready; tests
	// finish pods with podSim.Succeed / podSim.Fail.
	podSim *localcluster.PodSimulator
)

type setupStep struct {
	name string
	fn   func(ctx context.Context, cp *localcluster.ControlPlane) error
}

var setupSteps []setupStep

// registerSetup adds a step that TestMain runs after the apiserver is up and
// before the controllers, simulator and scheduler start (install CRDs here).
// Call it from an init function. A failing step fails the whole binary.
func registerSetup(name string, fn func(ctx context.Context, cp *localcluster.ControlPlane) error) {
	setupSteps = append(setupSteps, setupStep{name: name, fn: fn})
}

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		// The fast tier (make unit) needs no control plane: nothing here
		// runs without one.
		fmt.Fprintln(os.Stderr, "e2e: every test needs the in-process control plane; skipped with -short")
		os.Exit(0)
	}
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	begin := time.Now()
	// Every in-process scheduler runs with the shipped scheduler's feature
	// gates (gates are process-wide), so the tests prove what ships.
	gates, err := shippedSchedulerGates()
	if err == nil && gates != "" {
		err = utilfeature.DefaultMutableFeatureGate.Set(gates)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: the shipped scheduler's feature gates: %v\n", err)
		return 1
	}
	cp, err := localcluster.Start(localcluster.Options{
		// The upstream gang API is served so benchmarks can compare muster
		// with native PodGroups (scheduling.k8s.io/v1beta1).
		NativePodGroups: true,
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: control plane: %v\n", err)
		return 1
	}
	controlPlane = cp
	defer cp.Stop()

	for _, s := range setupSteps {
		if err := s.fn(ctx, cp); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: setup %s: %v\n", s.name, err)
			return 1
		}
	}
	if _, err := cp.StartControllers(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	if podSim, err = cp.StartPodSimulator(ctx, localcluster.PodSimulatorOptions{}); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	if _, err := localcluster.StartScheduler(ctx, cp, localcluster.SchedulerOptions{}); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: default scheduler: %v\n", err)
		return 1
	}
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "e2e: control plane ready in %s (kubeconfig %s)\n", time.Since(begin).Round(time.Millisecond), cp.KubeconfigPath)
	}
	return m.Run()
}

// testNamespace creates a namespace for t and deletes it when t ends.
func testNamespace(t testing.TB, prefix string) string {
	t.Helper()
	ns, err := controlPlane.NewNamespace(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// No namespace controller runs: a namespace the test deleted itself
		// is still Terminating, and deleting it again is a Conflict.
		if err := controlPlane.DeleteNamespace(context.Background(), ns); err != nil && !apierrors.IsConflict(err) {
			t.Error(err)
		}
	})
	return ns
}

// testPool creates n nodes in a pool named after the namespace and deletes
// them when t ends. spec may be nil (default nodes); a spec without a name
// names node i <pool>-<i>.
func testPool(t testing.TB, pool string, n int, spec func(i int) localcluster.NodeSpec) {
	t.Helper()
	ctx := context.Background()
	_, err := controlPlane.CreateNodes(ctx, n, func(i int) localcluster.NodeSpec {
		var s localcluster.NodeSpec
		if spec != nil {
			s = spec(i)
		}
		if s.Name == "" {
			s.Name = fmt.Sprintf("%s-%d", pool, i)
		}
		s.Pool = pool
		return s
	})
	t.Cleanup(func() {
		if err := controlPlane.DeleteNodes(ctx, localcluster.PoolLabel+"="+pool); err != nil {
			t.Error(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

// gpuPool is testPool of n nodes <pool>-<i> with gpus GPUs each.
func gpuPool(t testing.TB, pool string, n, gpus int) {
	t.Helper()
	testPool(t, pool, n, func(int) localcluster.NodeSpec { return localcluster.NodeSpec{GPUs: gpus} })
}

// shippedSchedulerGates is the --feature-gates value of the muster-scheduler
// container of the rendered kustomize set ("" when it sets none).
func shippedSchedulerGates() (string, error) {
	d, _, err := shippedDeployment()
	if err != nil {
		return "", err
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "muster-scheduler" {
			return imageFlagValue(c.Args, "feature-gates"), nil
		}
	}
	return "", fmt.Errorf("the Deployment muster-scheduler has no container muster-scheduler")
}

// shippedDeployment returns the rendered kustomize set's Deployment and
// its objects.
func shippedDeployment() (*appsv1.Deployment, []*unstructured.Unstructured, error) {
	objs, err := manifestrender.Kustomize(manifestsDir())
	if err != nil {
		return nil, nil, err
	}
	for _, o := range objs {
		if o.GetKind() == "Deployment" && o.GetName() == "muster-scheduler" {
			var d appsv1.Deployment
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
				return nil, nil, err
			}
			return &d, objs, nil
		}
	}
	return nil, nil, fmt.Errorf("the kustomize set has no Deployment muster-scheduler")
}
