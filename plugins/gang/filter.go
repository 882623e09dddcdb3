package gang

import (
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/muster-io/muster/plugins/gang/planfilter"
)

// profileRunner is the profile's framework as the planner's filter asks
// it: PreFilter from the runtime, the rest from the handle.
type profileRunner struct {
	preFilterRunner
	fwk.Handle
}

// planFilter is the plan.Filter of one plan: the profile's own PreFilter
// and Filter plugins, with this plugin's PreFilter stepping aside (simKey).
func (p *Plugin) planFilter() *planfilter.Filter {
	return planfilter.New(profileRunner{p.runner, p.h}, func(cs fwk.CycleState) { cs.Write(simKey, simMarker{}) })
}
