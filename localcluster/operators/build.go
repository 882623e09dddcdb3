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
	"path"
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
	if len(spec.SourcePatches) > 0 {
		// Patches change the binary: a new patch is a new cache entry.
		b, err := json.Marshal(spec.SourcePatches)
		if err != nil {
			return "", err
		}
		h.Write(b)
	}
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
	args := []string{"build", "-o", tmp}
	pkg := spec.MainPackage
	if len(spec.SourcePatches) > 0 {
		overlay, patched, err := writeOverlay(ctx, name, spec, dir, filepath.Dir(bin))
		if err != nil {
			return "", err
		}
		args, pkg = append(args, "-overlay", overlay), patched
	}
	if _, err := goCmd(ctx, dir, append(args, pkg)...); err != nil {
		return "", fmt.Errorf("build operator %s: %w", name, err)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	return bin, nil
}

// writeOverlay makes the operator's patched main package for go build
// -overlay, which may not replace files in the module cache: every Go file
// of the main package's directory, patched, under patched/ in the
// operator's own module directory (dir, which exists only in the
// overlay), so it builds against the same pinned modules. It writes the
// patched files and the overlay file into cacheDir and returns the overlay
// file and the package to build. Only files of the main package can be
// patched, which is all a hard-coded path in a command has needed.
func writeOverlay(ctx context.Context, name string, spec Spec, dir, cacheDir string) (overlay, pkg string, err error) {
	modDir, err := ModuleDir(ctx, name)
	if err != nil {
		return "", "", err
	}
	rel, ok := strings.CutPrefix(spec.MainPackage, spec.Module)
	if !ok || (rel != "" && !strings.HasPrefix(rel, "/")) {
		return "", "", fmt.Errorf("operator %s: sourcePatches: mainPackage %s is not in module %s", name, spec.MainPackage, spec.Module)
	}
	rel = strings.TrimPrefix(rel, "/")
	srcDir := filepath.Join(modDir, filepath.FromSlash(rel))
	files := map[string]string{} // base name → content
	entries, err := os.ReadDir(srcDir)
	if err != nil {
		return "", "", fmt.Errorf("operator %s: %w", name, err)
	}
	for _, e := range entries {
		if n := e.Name(); !e.IsDir() && strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			b, err := os.ReadFile(filepath.Join(srcDir, n))
			if err != nil {
				return "", "", err
			}
			files[n] = string(b)
		}
	}
	for i, p := range spec.SourcePatches {
		base := filepath.Base(p.File)
		src, ok := files[base]
		if !ok || filepath.ToSlash(filepath.Dir(p.File)) != path.Clean(rel) {
			return "", "", fmt.Errorf("operator %s: sourcePatches[%d]: %s is not a file of the main package %s", name, i, p.File, spec.MainPackage)
		}
		if n := strings.Count(src, p.Replace); n != 1 {
			return "", "", fmt.Errorf("operator %s: sourcePatches[%d]: %s holds %q %d times, want once: the patch does not fit this version of %s", name, i, p.File, p.Replace, n, spec.Module)
		}
		files[base] = strings.Replace(src, p.Replace, p.With, 1)
	}
	patchedDir := filepath.Join(cacheDir, "patched")
	if err := os.MkdirAll(patchedDir, 0o755); err != nil {
		return "", "", err
	}
	replace := map[string]string{}
	for n, content := range files {
		backing := filepath.Join(patchedDir, n)
		if err := os.WriteFile(backing, []byte(content), 0o644); err != nil {
			return "", "", err
		}
		replace[filepath.Join(dir, "patched", n)] = backing
	}
	b, err := json.Marshal(map[string]any{"Replace": replace})
	if err != nil {
		return "", "", err
	}
	overlay = filepath.Join(cacheDir, "overlay.json")
	return overlay, "./patched", os.WriteFile(overlay, b, 0o644)
}
