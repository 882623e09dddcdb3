package planfilter

import (
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"

	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// Snapshot is a fwk.SharedLister over nodes its owner keeps and changes:
// muster fit adds the members it places to their NodeInfos and takes its
// victims off theirs, and the plugins see each change. The lists the
// inter-pod affinity plugin asks for are made on each call from the nodes'
// own indexes, so they never go stale. Native pod groups
// (spec.schedulingGroup) have no state here: the offline judgement is of
// muster's gangs.
type Snapshot struct {
	nodes  []fwk.NodeInfo
	byName map[string]fwk.NodeInfo
}

var _ fwk.SharedLister = &Snapshot{}

// NewSnapshot returns a lister over nodes (in the order given).
func NewSnapshot(nodes []fwk.NodeInfo) *Snapshot {
	s := &Snapshot{nodes: nodes, byName: make(map[string]fwk.NodeInfo, len(nodes))}
	for _, ni := range nodes {
		s.byName[ni.Node().Name] = ni
	}
	return s
}

// NodeInfos implements fwk.SharedLister.
func (s *Snapshot) NodeInfos() fwk.NodeInfoLister { return nodeInfos{s} }

// StorageInfos implements fwk.SharedLister.
func (s *Snapshot) StorageInfos() fwk.StorageInfoLister { return storageInfos{s} }

// PodGroupStates implements fwk.SharedLister.
func (s *Snapshot) PodGroupStates() fwk.PodGroupStateLister { return noPodGroupStates{} }

// PodGroups implements fwk.SharedLister.
func (s *Snapshot) PodGroups() fwk.PodGroupLister { return noPodGroups{} }

// CompositePodGroupStates implements fwk.SharedLister.
func (s *Snapshot) CompositePodGroupStates() fwk.CompositePodGroupStateLister {
	return noCompositeStates{}
}

// CompositePodGroups implements fwk.SharedLister.
func (s *Snapshot) CompositePodGroups() fwk.CompositePodGroupLister { return noComposites{} }

type nodeInfos struct{ s *Snapshot }

func (l nodeInfos) List() ([]fwk.NodeInfo, error) { return l.s.nodes, nil }

func (l nodeInfos) HavePodsWithAffinityList() ([]fwk.NodeInfo, error) {
	return l.having(func(ni fwk.NodeInfo) int { return len(ni.GetPodsWithAffinity()) }), nil
}

func (l nodeInfos) HavePodsWithRequiredAntiAffinityList() ([]fwk.NodeInfo, error) {
	return l.having(func(ni fwk.NodeInfo) int { return len(ni.GetPodsWithRequiredAntiAffinity()) }), nil
}

func (l nodeInfos) HavePodsWithRequiredNonHostScopedAntiAffinityList() ([]fwk.NodeInfo, error) {
	return l.having(func(ni fwk.NodeInfo) int { return len(ni.GetPodsWithRequiredNonHostScopedAntiAffinity()) }), nil
}

func (l nodeInfos) having(count func(fwk.NodeInfo) int) []fwk.NodeInfo {
	var out []fwk.NodeInfo
	for _, ni := range l.s.nodes {
		if count(ni) > 0 {
			out = append(out, ni)
		}
	}
	return out
}

func (l nodeInfos) Get(name string) (fwk.NodeInfo, error) {
	if ni, ok := l.s.byName[name]; ok {
		return ni, nil
	}
	return nil, fmt.Errorf("nodeinfo not found for node name %q", name)
}

type storageInfos struct{ s *Snapshot }

func (l storageInfos) IsPVCUsedByPods(key string) bool {
	for _, ni := range l.s.nodes {
		if ni.GetPVCRefCounts()[key] > 0 {
			return true
		}
	}
	return false
}

// The native pod group listers answer that none exists.
type (
	noPodGroups       struct{}
	noPodGroupStates  struct{}
	noComposites      struct{}
	noCompositeStates struct{}
)

func (noPodGroups) Get(namespace, name string) (*schedulingv1beta1.PodGroup, error) {
	return nil, apierrors.NewNotFound(schedulingv1beta1.Resource("podgroups"), namespace+"/"+name)
}

func (noPodGroupStates) Get(namespace, name string) (fwk.PodGroupState, error) {
	return nil, fmt.Errorf("pod group %s/%s: no native pod group state offline", namespace, name)
}

func (noComposites) Get(namespace, name string) (*schedulingv1alpha3.CompositePodGroup, error) {
	return nil, apierrors.NewNotFound(schedulingv1alpha3.Resource("compositepodgroups"), namespace+"/"+name)
}

func (noCompositeStates) Get(namespace, name string) (fwk.CompositePodGroupState, error) {
	return nil, fmt.Errorf("composite pod group %s/%s: no native pod group state offline", namespace, name)
}

// The framework's preemption plugins ask for a snapshot they can change;
// fit never runs them (it runs the gang plugin's own victim search), so
// these refuse.
var _ fwk.MutableSnapshotSharedLister = &Snapshot{}

var errReadOnly = errors.New("the offline snapshot is changed by its owner only")

// StartMutations implements fwk.MutableSnapshotSharedLister.
func (s *Snapshot) StartMutations() error { return errReadOnly }

// EndMutations implements fwk.MutableSnapshotSharedLister.
func (s *Snapshot) EndMutations() error { return errReadOnly }

// AddPod implements fwk.MutableSnapshotSharedLister.
func (s *Snapshot) AddPod(fwk.PodInfo, string) error { return errReadOnly }

// RemovePod implements fwk.MutableSnapshotSharedLister.
func (s *Snapshot) RemovePod(klog.Logger, *v1.Pod, string) error { return errReadOnly }

// The framework's native gang plugins read pod groups through a manager;
// the snapshot is one that knows none.
var _ fwk.PodGroupManager = &Snapshot{}

// BuildHierarchySnapshotFromPod implements fwk.PodGroupManager.
func (s *Snapshot) BuildHierarchySnapshotFromPod(*v1.Pod) (fwk.PodGroupManager, error) { return s, nil }

// GetRootKeyForGroup implements fwk.PodGroupManager: every group is its
// own root.
func (s *Snapshot) GetRootKeyForGroup(key fwk.EntityKey) (fwk.EntityKey, bool, error) {
	return key, false, nil
}
