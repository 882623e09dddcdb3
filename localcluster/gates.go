package localcluster

import (
	"fmt"
	"strings"
	"sync"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/kubernetes/pkg/features"
)

// How feature gates work here. kube-apiserver, kube-scheduler and the
// kube-controller-manager controllers all read the process-global
// utilfeature.DefaultFeatureGate. The harness sets gates the way upstream's
// apiserver test server allows: it passes --feature-gates to the apiserver,
// whose StartTestServer parses them into a copy of the global gate and then
// sets every gate that differs on the global one for the life of that
// server (featuregatetesting.SetFeatureGatesDuringTest on the control
// plane's TB). Stop runs the TB's cleanups and so restores those gates. The
// scheduler and controllers started afterwards on the control plane see the
// gates as the apiserver set them.
//
// Consequences for several control planes in one process:
//   - one started while a gate is on serves that gate's API too (a process
//     whose first control plane turned GenericWorkload on has schedulers that
//     watch PodGroups, which must be served to sync), and
//   - only the control plane that changed a gate restores it, at its Stop.
//
// WorkloadWithJob is stricter (see Options.WorkloadWithJob): a Job
// controller built while the gate was off has no Workload or PodGroup
// informers, yet reads the gate on every sync, and once it is on fails the
// sync of every root Job, which then never gets pods. So turning the gate on
// under a running control plane that did not ask for it is refused instead.

// nativeGateUsers counts the live control planes of this process by whether
// they run with WorkloadWithJob. Start decides under its lock, so two
// concurrent Starts never disagree.
var nativeGateUsers struct {
	sync.Mutex
	withJobGate, withoutJobGate int
}

// gateUse is one control plane's entry in nativeGateUsers.
type gateUse struct {
	counted bool
	jobGate bool
}

// featureGateFlags returns the apiserver flags for the gates opts asks for,
// and those already on in the process, and records the control plane as a
// user of WorkloadWithJob or not; release undoes that at Stop.
func (cp *ControlPlane) featureGateFlags(opts Options) ([]string, error) {
	nativeGateUsers.Lock()
	defer nativeGateUsers.Unlock()
	jobGate := opts.WorkloadWithJob
	switch {
	case opts.WorkloadWithJob && !utilfeature.DefaultFeatureGate.Enabled(features.WorkloadWithJob) && nativeGateUsers.withoutJobGate > 0:
		return nil, fmt.Errorf("options: WorkloadWithJob: %d other control plane(s) of this process run without it, "+
			"and feature gates are process-global (their Job controllers would fail every root Job once it is on): "+
			"start the shared control plane with it, or test it in a test binary of its own", nativeGateUsers.withoutJobGate)
	case !jobGate && (nativeGateUsers.withJobGate > 0 || utilfeature.DefaultFeatureGate.Enabled(features.WorkloadWithJob)):
		// The gate is (or is about to be) on anyway; serve what it needs.
		jobGate = true
	}
	cp.gates = gateUse{counted: true, jobGate: jobGate}
	if jobGate {
		nativeGateUsers.withJobGate++
	} else {
		nativeGateUsers.withoutJobGate++
	}

	var gates []string
	if jobGate || opts.NativePodGroups || utilfeature.DefaultFeatureGate.Enabled(features.GenericWorkload) {
		gates = append(gates, string(features.GenericWorkload)+"=true")
	}
	if jobGate {
		gates = append(gates, string(features.WorkloadWithJob)+"=true")
	}
	if len(gates) == 0 {
		return nil, nil
	}
	return []string{"--feature-gates=" + strings.Join(gates, ","), "--runtime-config=scheduling.k8s.io/v1beta1=true"}, nil
}

// release removes the control plane from nativeGateUsers; safe to call
// when it was never counted.
func (g *gateUse) release() {
	if !g.counted {
		return
	}
	nativeGateUsers.Lock()
	defer nativeGateUsers.Unlock()
	if g.jobGate {
		nativeGateUsers.withJobGate--
	} else {
		nativeGateUsers.withoutJobGate--
	}
	g.counted = false
}
