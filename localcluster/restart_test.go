package localcluster

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// echoServer answers every line with "<name> <line>" until closed.
func echoServer(t *testing.T, name string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := fmt.Fprintf(c, "%s %s", name, line); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// roundTrip sends line on c and returns the answer, or the error.
func roundTrip(c net.Conn, r *bufio.Reader, line string) (string, error) {
	if err := c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return "", err
	}
	if _, err := fmt.Fprintln(c, line); err != nil {
		return "", err
	}
	s, err := r.ReadString('\n')
	return strings.TrimSuffix(s, "\n"), err
}

// The proxy keeps one address while its backend changes: open connections
// are cut at a switch, connections while no backend is routed are refused,
// and new connections reach the new backend.
func TestAPIProxyRoutes(t *testing.T) {
	first, second := echoServer(t, "first"), echoServer(t, "second")
	p, err := newAPIProxy()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.close)
	dial := func() (net.Conn, *bufio.Reader) {
		t.Helper()
		c, err := net.Dial("tcp", p.addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c, bufio.NewReader(c)
	}
	// answered reports whether a connection made now gets an answer.
	answered := func(line string) (string, bool) {
		c, err := net.Dial("tcp", p.addr())
		if err != nil {
			return "", false // reset before the dial returned
		}
		defer c.Close()
		got, err := roundTrip(c, bufio.NewReader(c), line)
		return got, err == nil
	}

	p.route(first)
	c1, r1 := dial()
	if got, err := roundTrip(c1, r1, "a"); err != nil || got != "first a" {
		t.Fatalf("through the proxy to the first backend: %q, %v", got, err)
	}

	p.route("")
	if got, err := roundTrip(c1, r1, "b"); err == nil {
		t.Errorf("a connection open when the backend went away still answers: %q", got)
	}
	if got, ok := answered("c"); ok {
		t.Errorf("a connection made with no backend answers: %q", got)
	}

	p.route(second)
	c3, r3 := dial()
	if got, err := roundTrip(c3, r3, "d"); err != nil || got != "second d" {
		t.Fatalf("through the same address to the second backend: %q, %v", got, err)
	}
}

// A restart keeps every client of the control plane working: the typed and
// dynamic clients and a client built from the kubeconfig file before the
// restart read what was stored before it and write after it, and an
// informer started before it sees objects created after it.
func TestRestartAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane; not in -short")
	}
	ctx := context.Background()
	if err := (&ControlPlane{}).RestartAPIServer(ctx, 0); err == nil {
		t.Error("RestartAPIServer of a control plane started without Restartable: no error")
	}
	cp, err := Start(Options{Restartable: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	kc, err := clientcmd.BuildConfigFromFlags("", cp.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	fromFile, err := kubernetes.NewForConfig(kc)
	if err != nil {
		t.Fatal(err)
	}
	infCtx, stopInformers := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactory(cp.Client, 0)
	// Shutdown waits for the informers, which stop with their context.
	defer func() { stopInformers(); factory.Shutdown() }()
	configMaps := factory.Core().V1().ConfigMaps()
	configMaps.Informer()
	factory.Start(infCtx.Done())
	if err := waitForSync(infCtx, factory.WaitForCacheSync); err != nil {
		t.Fatal(err)
	}
	cm := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
	}
	if _, err := cp.Client.CoreV1().ConfigMaps("default").Create(ctx, cm("before"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	begin := time.Now()
	if err := cp.RestartAPIServer(ctx, 500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	t.Logf("restarted in %s", time.Since(begin).Round(time.Millisecond))

	if _, err := fromFile.CoreV1().ConfigMaps("default").Get(ctx, "before", metav1.GetOptions{}); err != nil {
		t.Errorf("the kubeconfig's client, reading what was stored before the restart: %v", err)
	}
	after := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "after"},
	}}
	if _, err := cp.Dynamic.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("default").Create(ctx, after, metav1.CreateOptions{}); err != nil {
		t.Errorf("the dynamic client, after the restart: %v", err)
	}
	err = WaitFor(ctx, ShortTimeout, "the informer started before the restart to see ConfigMap after", func(context.Context) (bool, string, error) {
		_, err := configMaps.Lister().ConfigMaps("default").Get("after")
		return err == nil, fmt.Sprint(err), nil
	})
	if err != nil {
		t.Error(err)
	}
}
