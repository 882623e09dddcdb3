package gang

import (
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// nominatedPods returns the pods nominated on node, whole. The queue
// answers with the pod it holds, or with its name and UID alone when the
// pod is in no queue (being tried right now): such a pod is looked up in
// the informer, and left out when it is gone or bound (then the snapshot
// has it).
func (p *Plugin) nominatedPods(node string) []fwk.PodInfo {
	var out []fwk.PodInfo
	for _, pi := range p.h.NominatedPodsForNode(node) {
		pod := pi.GetPod()
		if len(pod.Spec.Containers) > 0 {
			out = append(out, pi)
			continue
		}
		whole, err := p.podLister.Pods(pod.Namespace).Get(pod.Name)
		if err != nil || whole.UID != pod.UID || whole.Spec.NodeName != "" {
			continue
		}
		if wi, err := framework.NewPodInfo(whole); err == nil {
			out = append(out, wi)
		}
	}
	return out
}
