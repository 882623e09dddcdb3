package operators

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
)

// goCmd runs the go command in dir and returns its stdout.
func goCmd(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	// The operator modules are separate modules: never let a go.work or
	// the caller's GOFLAGS (say -mod=vendor) redirect them.
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s (in %s): %w\n%s", strings.Join(args, " "), dir, err, stderr.String())
	}
	return out, nil
}

// OperatorModuleDir returns the operator's module directory in the module
// cache, downloading it if needed.
func ModuleDir(ctx context.Context, name string) (string, error) {
	spec, dir, err := Get(name)
	if err != nil {
		return "", err
	}
	out, err := goCmd(ctx, dir, "mod", "download", "-json", spec.Module)
	if err != nil {
		return "", err
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil {
		return "", fmt.Errorf("go mod download %s: %w", spec.Module, err)
	}
	if m.Error != "" || m.Dir == "" {
		return "", fmt.Errorf("go mod download %s: %s", spec.Module, m.Error)
	}
	return m.Dir, nil
}

// buildLocks serializes builds of one cached binary (one lock per path), so
// that two operators build at the same time while two callers of the same
// operator build it once.
var buildLocks sync.Map // cache path → *sync.Mutex

// BuildOperator builds the operator's binary once and caches it under
// os.UserCacheDir()/muster-operators, keyed by a hash of the operator
// module's go.mod and go.sum, so later runs reuse it. A cold build takes
// 2–5 minutes per operator on two cores; different operators build in
// parallel. operator.yaml is left out of
// the key so that editing the command line keeps the binary; a new
// mainPackage at the same module version needs the cache entry removed.
func Build(ctx context.Context, name string) (string, error) {
	spec, dir, err := Get(name)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return "", fmt.Errorf("operator %s: %w", name, err)
		}
		h.Write(b)
	}
	h.Write([]byte(runtime.Version()))
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	bin := filepath.Join(cache, "muster-operators", name+"-"+hex.EncodeToString(h.Sum(nil))[:16], name)
	mu, _ := buildLocks.LoadOrStore(bin, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return "", err
	}
	// Build beside the target and rename, so a concurrent or interrupted
	// build never leaves a half-written binary at the cached path.
	tmp := bin + ".tmp-" + strconv.Itoa(os.Getpid())
	defer os.Remove(tmp)
	if _, err := goCmd(ctx, dir, "build", "-o", tmp, spec.MainPackage); err != nil {
		return "", fmt.Errorf("build operator %s: %w", name, err)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	return bin, nil
}
