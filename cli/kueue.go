package cli

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/muster-io/muster/definition"
)

// Kueue (kueue.x-k8s.io) admits workloads by quota before muster places
// them: it keeps a job suspended, or its pods gated, until its ClusterQueue
// has the quota, and tracks each job in a Workload object it owns. The CLI
// reads those Workloads to say which gate a workload is behind: Kueue's
// quota or muster's placement. A cluster without Kueue serves no Workloads,
// and every command then behaves as without it.

var (
	kueueGroup        = "kueue.x-k8s.io"
	kueueVersion      = "v1beta2"
	kueueWorkloadGK   = schema.GroupKind{Group: kueueGroup, Kind: "Workload"}
	kueueWorkloadGVR  = schema.GroupVersionResource{Group: kueueGroup, Version: kueueVersion, Resource: "workloads"}
	kueueLocalQGVR    = schema.GroupVersionResource{Group: kueueGroup, Version: kueueVersion, Resource: "localqueues"}
	kueueClusterQGVR  = schema.GroupVersionResource{Group: kueueGroup, Version: kueueVersion, Resource: "clusterqueues"}
	kueueQueueNameKey = "kueue.x-k8s.io/queue-name"
)

// QueueView is what Kueue says about a workload.
type QueueView struct {
	// System is the admission system ("Kueue"); Workload the name of its
	// Workload object.
	System   string `json:"system"`
	Workload string `json:"workload"`
	// LocalQueue the workload was submitted to, ClusterQueue it draws
	// quota from (admitted: the admission's; else the LocalQueue's).
	LocalQueue   string `json:"localQueue,omitempty"`
	ClusterQueue string `json:"clusterQueue,omitempty"`
	// State is Pending (waiting for quota), QuotaReserved (waiting for
	// admission checks), Admitted, Evicted, Inactive or Finished.
	State string `json:"state"`
	// Needs are the GPUs the workload asks of its ClusterQueue, by
	// resource name, and Free the ClusterQueue's nominal quota not
	// reserved (without borrowing from a cohort); Free is absent when
	// the ClusterQueue could not be read.
	Needs map[string]int64 `json:"needs,omitempty"`
	Free  map[string]int64 `json:"free,omitempty"`
	// Reason and Message are Kueue's own, from the condition that holds
	// the workload (QuotaReserved, Evicted, …).
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Evictions counts Kueue's evictions of this workload so far
	// (status.requeueState.count).
	Evictions int64 `json:"evictions,omitempty"`
	// Summary is the line describe prints.
	Summary string `json:"summary"`
}

// Queue states.
const (
	QueuePending       = "Pending"
	QueueQuotaReserved = "QuotaReserved"
	QueueAdmitted      = "Admitted"
	QueueEvicted       = "Evicted"
	QueueInactive      = "Inactive"
	QueueFinished      = "Finished"
)

// kueueInput is what describe gathers from Kueue for one workload.
type kueueInput struct {
	Workload *unstructured.Unstructured
	// Admitted are the Workloads of every namespace, when they could be
	// listed: what holds quota is counted from them, as Kueue's own cache
	// counts it, ahead of the ClusterQueue's status, which Kueue writes a
	// moment later. Nil: the status is used.
	Admitted []unstructured.Unstructured
	// ClusterQueue is the workload's ClusterQueue object, nil when it
	// could not be read; ClusterQueueName its name when known.
	ClusterQueue     *unstructured.Unstructured
	ClusterQueueName string
}

// listKueueWorkloads lists the Kueue Workloads of ns ("" for all); none,
// and no error, where the cluster does not serve them.
func listKueueWorkloads(ctx context.Context, c *Cluster, ns string) ([]unstructured.Unstructured, error) {
	if _, err := c.Mapper.RESTMapping(kueueWorkloadGK, kueueVersion); err != nil {
		return nil, nil
	}
	ri := c.Dynamic.Resource(kueueWorkloadGVR)
	var list *unstructured.UnstructuredList
	var err error
	if ns == "" {
		list, err = ri.List(ctx, metav1.ListOptions{})
	} else {
		list, err = ri.Namespace(ns).List(ctx, metav1.ListOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("list Kueue Workloads: %v", err)
	}
	return list.Items, nil
}

// kueueWorkloadOf returns the Workload Kueue keeps for the object uid,
// nil if none. Kueue owns its Workload by the job (or, for pod groups,
// by each pod); of several (a job re-created under one uid cannot have
// them, a stale one can) the newest counts.
func kueueWorkloadOf(wls []unstructured.Unstructured, uid types.UID) *unstructured.Unstructured {
	var out *unstructured.Unstructured
	for i := range wls {
		for _, r := range wls[i].GetOwnerReferences() {
			if r.UID == uid && (out == nil || out.GetCreationTimestamp().Time.Before(wls[i].GetCreationTimestamp().Time)) {
				out = &wls[i]
			}
		}
	}
	return out
}

// readKueueQueue completes in with the workload's ClusterQueue: the
// admission's, else the one its LocalQueue points at. A queue that cannot
// be read (RBAC often allows Workloads but not ClusterQueues) leaves the
// quota unknown, not the view broken.
func readKueueQueue(ctx context.Context, c *Cluster, in *kueueInput) []string {
	wl := in.Workload
	var warnings []string
	name, _, _ := unstructured.NestedString(wl.Object, "status", "admission", "clusterQueue")
	if name == "" {
		lq, _, _ := unstructured.NestedString(wl.Object, "spec", "queueName")
		if lq == "" {
			return nil
		}
		obj, err := c.Dynamic.Resource(kueueLocalQGVR).Namespace(wl.GetNamespace()).Get(ctx, lq, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return []string{fmt.Sprintf("Kueue: LocalQueue %s/%s does not exist: the workload waits for it", wl.GetNamespace(), lq)}
		case err != nil:
			return []string{fmt.Sprintf("Kueue: get LocalQueue %s/%s: %v", wl.GetNamespace(), lq, err)}
		}
		name, _, _ = unstructured.NestedString(obj.Object, "spec", "clusterQueue")
	}
	in.ClusterQueueName = name
	if name == "" {
		return warnings
	}
	cq, err := c.Dynamic.Resource(kueueClusterQGVR).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return append(warnings, fmt.Sprintf("Kueue: get ClusterQueue %s: %v (its free quota is not shown)", name, err))
	}
	in.ClusterQueue = cq
	// Best effort: a user who may not list every namespace's Workloads
	// gets the ClusterQueue's status instead.
	if all, err := c.Dynamic.Resource(kueueWorkloadGVR).List(ctx, metav1.ListOptions{}); err == nil {
		in.Admitted = all.Items
	}
	return warnings
}

// queueView turns what Kueue keeps into the view; gangReason is muster's
// reason for a pending gang of the workload ("" when none waits).
func queueView(in *kueueInput, g gpuCount, gangReason string) *QueueView {
	wl := in.Workload
	v := &QueueView{System: "Kueue", Workload: wl.GetName(), ClusterQueue: in.ClusterQueueName}
	v.LocalQueue, _, _ = unstructured.NestedString(wl.Object, "spec", "queueName")
	v.Evictions = nestedCount(wl.Object, "status", "requeueState", "count")
	v.Needs = kueueNeeds(wl, g)
	if in.ClusterQueue != nil {
		v.Free = kueueFree(in.ClusterQueue, in.Admitted, v.Needs)
	}
	cond := func(typ string) (status, reason, message string) { return condition(wl, typ) }
	active, found, _ := unstructured.NestedBool(wl.Object, "spec", "active")
	finished, _, _ := cond("Finished")
	admitted, _, _ := cond("Admitted")
	reserved, rReason, rMsg := cond("QuotaReserved")
	evicted, eReason, eMsg := cond("Evicted")
	cq := "ClusterQueue " + orUnknown(v.ClusterQueue)
	switch {
	case finished == "True":
		v.State = QueueFinished
		v.Summary = "finished (Kueue)"
	case admitted == "True":
		v.State = QueueAdmitted
		v.Summary = "admitted by Kueue to " + cq
		if gangReason != "" {
			v.Summary = "admitted by Kueue; gang pending: " + gangReason
		}
	case found && !active:
		v.State = QueueInactive
		_, v.Reason, v.Message = cond("Evicted")
		v.Summary = "deactivated by Kueue (spec.active false): not queued until it is set true again"
		if v.Message != "" {
			v.Summary += "; last eviction: " + v.Message
		}
	case reserved == "True":
		v.State = QueueQuotaReserved
		v.Reason, v.Message = rReason, rMsg
		v.Summary = "quota reserved in " + cq + "; waiting for Kueue's admission checks"
	case evicted == "True":
		v.State = QueueEvicted
		v.Reason, v.Message = eReason, eMsg
		v.Summary = fmt.Sprintf("evicted by Kueue (%s: %s); requeued in %s", eReason, eMsg, cq)
	default:
		v.State = QueuePending
		v.Reason, v.Message = rReason, rMsg
		v.Summary = "waiting for quota in " + cq + needsText(v)
		if v.Message != "" {
			v.Summary += " (Kueue: " + v.Message + ")"
		} else {
			v.Summary += " (Kueue)"
		}
	}
	return v
}

func orUnknown(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}

// needsText is ": needs 16 nvidia.com/gpu, 8 free" for the GPUs the
// workload asks, "" when it asks none.
func needsText(v *QueueView) string {
	names := make([]string, 0, len(v.Needs))
	for n := range v.Needs {
		names = append(names, n)
	}
	sort.Strings(names)
	var parts []string
	for _, n := range names {
		s := fmt.Sprintf("%d %s", v.Needs[n], n)
		if free, ok := v.Free[n]; ok {
			s += fmt.Sprintf(", %d free", free)
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return ""
	}
	return ": needs " + strings.Join(parts, "; ")
}

// kueueNeeds sums the GPUs of the Workload's pod sets: count × the
// requests of the template, by resource name (the quota Kueue counts).
func kueueNeeds(wl *unstructured.Unstructured, g gpuCount) map[string]int64 {
	sets, _, _ := unstructured.NestedSlice(wl.Object, "spec", "podSets")
	out := map[string]int64{}
	for _, s := range sets {
		m, ok := s.(map[string]any)
		if !ok {
			continue
		}
		count := nestedCount(m, "count")
		tmpl, ok, _ := unstructured.NestedMap(m, "template")
		if !ok {
			continue
		}
		var pt corev1.PodTemplateSpec
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(tmpl, &pt); err != nil {
			continue
		}
		req := definition.PodRequests(&pt.Spec)
		for _, n := range g.names {
			if q, ok := req[n]; ok {
				out[string(n)] += q.Value() * count
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// kueueFree is, for each resource of needs, the ClusterQueue's nominal
// quota over its flavors less what is reserved: by the Workloads that hold
// quota in it (admitted, when they were listed), else by its status.
func kueueFree(cq *unstructured.Unstructured, wls []unstructured.Unstructured, needs map[string]int64) map[string]int64 {
	if len(needs) == 0 {
		return nil
	}
	nominal, reserved := map[string]int64{}, map[string]int64{}
	groups, _, _ := unstructured.NestedSlice(cq.Object, "spec", "resourceGroups")
	for _, g := range groups {
		gm, _ := g.(map[string]any)
		flavors, _, _ := unstructured.NestedSlice(gm, "flavors")
		for _, f := range flavors {
			fm, _ := f.(map[string]any)
			addQuantities(fm, "resources", "nominalQuota", nominal)
		}
	}
	if wls != nil {
		for i := range wls {
			wl := &wls[i]
			if q, _, _ := unstructured.NestedString(wl.Object, "status", "admission", "clusterQueue"); q != cq.GetName() ||
				conditionStatus(wl, "QuotaReserved") != "True" || conditionStatus(wl, "Finished") == "True" {
				continue
			}
			sets, _, _ := unstructured.NestedSlice(wl.Object, "status", "admission", "podSetAssignments")
			for _, s := range sets {
				sm, _ := s.(map[string]any)
				usage, _, _ := unstructured.NestedMap(sm, "resourceUsage")
				for name, q := range usage {
					if qs, ok := q.(string); ok {
						if qty, err := resource.ParseQuantity(qs); err == nil {
							reserved[name] += qty.Value()
						}
					}
				}
			}
		}
	} else {
		usage, _, _ := unstructured.NestedSlice(cq.Object, "status", "flavorsReservation")
		for _, f := range usage {
			fm, _ := f.(map[string]any)
			addQuantities(fm, "resources", "total", reserved)
		}
	}
	out := map[string]int64{}
	for n := range needs {
		if q, ok := nominal[n]; ok {
			out[n] = max(q-reserved[n], 0)
		}
	}
	return out
}

// addQuantities adds the quantity field of each {name, field} item of
// m[list] to into, by name.
func addQuantities(m map[string]any, list, field string, into map[string]int64) {
	items, _, _ := unstructured.NestedSlice(m, list)
	for _, it := range items {
		im, _ := it.(map[string]any)
		name, _ := im["name"].(string)
		var s string
		switch q := im[field].(type) {
		case string:
			s = q
		case int64:
			s = fmt.Sprint(q)
		case float64:
			s = fmt.Sprint(q)
		}
		if qty, err := resource.ParseQuantity(s); err == nil && name != "" {
			into[name] += qty.Value()
		}
	}
}

// nestedCount reads a whole number at path, from the API (int64) or from
// YAML or JSON decoded without types (float64); 0 when absent or not one.
func nestedCount(m map[string]any, path ...string) int64 {
	v, ok, _ := unstructured.NestedFieldNoCopy(m, path...)
	if !ok {
		return 0
	}
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	}
	return 0
}

// condition returns the status, reason and message of the object's
// status condition of type typ ("" for each when it has none).
func condition(obj *unstructured.Unstructured, typ string) (status, reason, message string) {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			s, _ := m["status"].(string)
			r, _ := m["reason"].(string)
			msg, _ := m["message"].(string)
			return s, r, msg
		}
	}
	return "", "", ""
}

func conditionStatus(obj *unstructured.Unstructured, typ string) string {
	s, _, _ := condition(obj, typ)
	return s
}

// QueueFit is fit's answer for a workload submitted to Kueue (the label
// kueue.x-k8s.io/queue-name): does its ClusterQueue have the quota, next
// to whether the nodes have the room.
type QueueFit struct {
	LocalQueue   string           `json:"localQueue"`
	ClusterQueue string           `json:"clusterQueue,omitempty"`
	Needs        map[string]int64 `json:"needs,omitempty"`
	Free         map[string]int64 `json:"free,omitempty"`
	// HasQuota: the ClusterQueue's unreserved nominal quota covers Needs
	// (without borrowing); Admitted: Kueue has admitted the workload
	// already, so it holds its quota.
	HasQuota bool   `json:"hasQuota"`
	Admitted bool   `json:"admitted,omitempty"`
	Summary  string `json:"summary"`
}

// kueueFit judges the quota of workload root in ns for fit; nil when root
// is not submitted to Kueue. needs are its GPUs by resource name.
func kueueFit(ctx context.Context, c *Cluster, root *unstructured.Unstructured, ns string, needs map[string]int64) *QueueFit {
	lq := root.GetLabels()[kueueQueueNameKey]
	if lq == "" {
		return nil
	}
	f := &QueueFit{LocalQueue: lq, Needs: needs}
	if _, err := c.Mapper.RESTMapping(kueueWorkloadGK, kueueVersion); err != nil {
		f.Summary = fmt.Sprintf("labelled for Kueue's LocalQueue %s, but the cluster serves no Kueue: nothing would admit it", lq)
		return f
	}
	if uid := root.GetUID(); uid != "" {
		if wls, err := listKueueWorkloads(ctx, c, ns); err == nil {
			if wl := kueueWorkloadOf(wls, uid); wl != nil && conditionStatus(wl, "Admitted") == "True" {
				f.Admitted, f.HasQuota = true, true
				f.ClusterQueue, _, _ = unstructured.NestedString(wl.Object, "status", "admission", "clusterQueue")
				f.Summary = "admitted by Kueue to ClusterQueue " + f.ClusterQueue + ": it holds its quota"
				return f
			}
		}
	}
	probe := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"namespace": ns}, "spec": map[string]any{"queueName": lq}}}
	in := &kueueInput{Workload: probe}
	warnings := readKueueQueue(ctx, c, in)
	f.ClusterQueue = in.ClusterQueueName
	if in.ClusterQueue == nil {
		f.Summary = "Kueue's quota not evaluated"
		if len(warnings) > 0 {
			f.Summary += ": " + warnings[0]
		}
		return f
	}
	f.Free = kueueFree(in.ClusterQueue, in.Admitted, needs)
	f.HasQuota = true
	var short []string
	names := make([]string, 0, len(needs))
	for n := range needs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		free, covered := f.Free[n]
		switch {
		case !covered:
			f.HasQuota = false
			short = append(short, fmt.Sprintf("%s is not covered by it (Kueue admits nothing that asks for it)", n))
		case free < needs[n]:
			f.HasQuota = false
			short = append(short, fmt.Sprintf("needs %d %s, %d free", needs[n], n, free))
		}
	}
	if f.HasQuota {
		f.Summary = "ClusterQueue " + f.ClusterQueue + " has the quota" + needsText(&QueueView{Needs: needs, Free: f.Free}) + " (Kueue would admit it)"
	} else {
		f.Summary = "ClusterQueue " + f.ClusterQueue + " lacks the quota: " + strings.Join(short, "; ") + " (Kueue keeps it queued)"
	}
	return f
}
