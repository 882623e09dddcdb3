package localcluster

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
)

// PodSimulatorOptions configures the pod-status simulator.
type PodSimulatorOptions struct {
	// AutoCompleteAfter, when positive, marks every Running pod Succeeded
	// this long after it started (benchmarks that need pods to go away).
	AutoCompleteAfter time.Duration
	// Workers is the number of status writers; default 4.
	Workers int
}

// PodSimulator plays kubelet for the fake nodes: it marks every bound
// Pending pod Running and Ready (with PodScheduled, Initialized,
// ContainersReady and Ready conditions and running container statuses),
// finishes pods on request (Succeed, Fail), and force-deletes bound pods
// that get a deletionTimestamp, which a kubelet would otherwise finish.
type PodSimulator struct {
	cp     *ControlPlane
	opts   PodSimulatorOptions
	lister listersv1.PodLister
	queue  workqueue.TypedRateLimitingInterface[types.NamespacedName]
	ipSeq  atomic.Uint32
	stop   func()
}

// Stop stops the simulator and waits for its workers.
func (s *PodSimulator) Stop() { s.stop() }

// StartPodSimulator starts the simulator; it runs until its Stop is called
// or the control plane stops. Only one should run per control plane.
func (cp *ControlPlane) StartPodSimulator(ctx context.Context, opts PodSimulatorOptions) (*PodSimulator, error) {
	if err := cp.live(); err != nil {
		return nil, err
	}
	if opts.Workers <= 0 {
		opts.Workers = 4
	}
	ctx, cancel := context.WithCancel(ctx)
	inf := informers.NewSharedInformerFactory(cp.Client, 0)
	podInf := inf.Core().V1().Pods()
	s := &PodSimulator{
		cp:     cp,
		opts:   opts,
		lister: podInf.Lister(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName](),
			workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "pod-simulator"}),
	}
	enqueue := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok && s.wants(p) {
			s.queue.Add(types.NamespacedName{Namespace: p.Namespace, Name: p.Name})
		}
	}
	if _, err := podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		cancel()
		return nil, fmt.Errorf("pod simulator: %w", err)
	}
	inf.Start(ctx.Done())
	if err := waitForSync(ctx, inf.WaitForCacheSync); err != nil {
		cancel()
		inf.Shutdown()
		return nil, fmt.Errorf("pod simulator: %w", err)
	}
	var wg sync.WaitGroup
	for i := 0; i < opts.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wait.UntilWithContext(ctx, s.work, time.Second)
		}()
	}
	stop := sync.OnceFunc(func() {
		cancel()
		s.queue.ShutDown()
		wg.Wait()
		inf.Shutdown()
	})
	cp.OnStop("pod simulator", stop)
	s.stop = stop
	return s, nil
}

// wants reports whether the pod needs the simulator's attention.
func (s *PodSimulator) wants(p *corev1.Pod) bool {
	if p.Spec.NodeName == "" {
		return false
	}
	if p.DeletionTimestamp != nil {
		return ptr.Deref(p.DeletionGracePeriodSeconds, 0) > 0
	}
	switch p.Status.Phase {
	case corev1.PodPending, "":
		return true
	case corev1.PodRunning:
		return s.opts.AutoCompleteAfter > 0
	}
	return false
}

func (s *PodSimulator) work(ctx context.Context) {
	for {
		key, quit := s.queue.Get()
		if quit {
			return
		}
		err := s.sync(ctx, key)
		switch {
		case err == nil:
			s.queue.Forget(key)
		case ctx.Err() != nil:
			s.queue.Forget(key)
		default:
			s.queue.AddRateLimited(key)
		}
		s.queue.Done(key)
	}
}

func (s *PodSimulator) sync(ctx context.Context, key types.NamespacedName) error {
	pod, err := s.lister.Pods(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !s.wants(pod) {
		return nil
	}
	pods := s.cp.Client.CoreV1().Pods(pod.Namespace)
	if pod.DeletionTimestamp != nil {
		// What the kubelet does once the containers are gone: delete with
		// grace 0. The UID precondition spares a new pod of the same name.
		err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{
			GracePeriodSeconds: ptr.To[int64](0),
			Preconditions:      &metav1.Preconditions{UID: &pod.UID},
		})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return err
	}
	if pod.Status.Phase == corev1.PodRunning {
		started := pod.Status.StartTime
		if started == nil {
			return nil
		}
		if left := s.opts.AutoCompleteAfter - time.Since(started.Time); left > 0 {
			s.queue.AddAfter(key, left)
			return nil
		}
		return s.finish(ctx, pod.Namespace, pod.Name, corev1.PodSucceeded, "Completed", "completed by the pod simulator")
	}
	upd := pod.DeepCopy()
	setRunning(upd, s.nextIP())
	_, err = pods.UpdateStatus(ctx, upd, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (s *PodSimulator) nextIP() string {
	n := s.ipSeq.Add(1)
	return fmt.Sprintf("10.%d.%d.%d", 64+(n>>16)&0x3f, (n>>8)&0xff, n&0xff)
}

// setRunning turns pod's status into that of a started pod with all
// containers running and ready.
func setRunning(pod *corev1.Pod, ip string) {
	now := metav1.Now()
	st := &pod.Status
	st.Phase = corev1.PodRunning
	st.StartTime = &now
	st.PodIP = ip
	st.PodIPs = []corev1.PodIP{{IP: ip}}
	st.HostIP = "192.168.0.1"
	st.HostIPs = []corev1.HostIP{{IP: st.HostIP}}
	for _, t := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		setCondition(st, t, corev1.ConditionTrue, "", now)
	}
	st.InitContainerStatuses = nil
	for _, c := range pod.Spec.InitContainers {
		st.InitContainerStatuses = append(st.InitContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image, Ready: true,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", StartedAt: now, FinishedAt: now}},
		})
	}
	st.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image, Ready: true, Started: ptr.To(true),
			ContainerID: "fake://" + string(pod.UID) + "/" + c.Name,
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
}

func setCondition(st *corev1.PodStatus, t corev1.PodConditionType, status corev1.ConditionStatus, reason string, now metav1.Time) {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			if st.Conditions[i].Status != status {
				st.Conditions[i].LastTransitionTime = now
			}
			st.Conditions[i].Status = status
			st.Conditions[i].Reason = reason
			return
		}
	}
	st.Conditions = append(st.Conditions, corev1.PodCondition{Type: t, Status: status, Reason: reason, LastTransitionTime: now})
}

// Succeed marks the pod Succeeded with every container exited 0, as a
// kubelet does when the work is done.
func (s *PodSimulator) Succeed(ctx context.Context, ns, name string) error {
	return s.finish(ctx, ns, name, corev1.PodSucceeded, "Completed", "")
}

// Fail marks the pod Failed with every container exited 1 and reason.
func (s *PodSimulator) Fail(ctx context.Context, ns, name, reason string) error {
	if reason == "" {
		reason = "Error"
	}
	return s.finish(ctx, ns, name, corev1.PodFailed, reason, "failed by the pod simulator")
}

func (s *PodSimulator) finish(ctx context.Context, ns, name string, phase corev1.PodPhase, reason, msg string) error {
	pods := s.cp.Client.CoreV1().Pods(ns)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		exit := int32(0)
		if phase == corev1.PodFailed {
			exit = 1
		}
		st := &pod.Status
		st.Phase = phase
		st.Message = msg
		if st.StartTime == nil {
			st.StartTime = &now
		}
		setCondition(st, corev1.PodReady, corev1.ConditionFalse, "PodCompleted", now)
		setCondition(st, corev1.ContainersReady, corev1.ConditionFalse, "PodCompleted", now)
		st.ContainerStatuses = nil
		for _, c := range pod.Spec.Containers {
			st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
				Name: c.Name, Image: c.Image, ImageID: c.Image, Started: ptr.To(false),
				ContainerID: "fake://" + string(pod.UID) + "/" + c.Name,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
					ExitCode: exit, Reason: reason, StartedAt: *st.StartTime, FinishedAt: now,
				}},
			})
		}
		_, err = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("mark pod %s/%s %s: %w", ns, name, phase, err)
	}
	return nil
}
