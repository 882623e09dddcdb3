package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

var testCreated = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fakeBinaries writes a small file per built Binary into a new directory,
// its content naming the binary and seed.
func fakeBinaries(t *testing.T, seed string) string {
	t.Helper()
	dir := t.TempDir()
	for _, b := range Binaries {
		if b.Package == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, path.Base(b.Package)), []byte("ELF "+b.Path+" "+seed), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func testOptions() Options {
	return Options{Version: "v1.2.3", Revision: "0123abcd", Created: testCreated}
}

// layerEntries reads a gzip-compressed layer: its headers in order.
func layerEntries(t *testing.T, data []byte) []*tar.Header {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var out []*tar.Header
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, h)
	}
}

// TestLayer: the layer holds the binaries where the manifests run them,
// kubectl-muster as a link after its target, the nonroot account, every
// entry sorted, root-owned (but the home directory) and at Created.
func TestLayer(t *testing.T) {
	data, err := Layer(fakeBinaries(t, "a"), testCreated)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	byName := map[string]*tar.Header{}
	for _, h := range layerEntries(t, data) {
		names = append(names, h.Name)
		byName[h.Name] = h
		if !h.ModTime.Equal(testCreated) {
			t.Errorf("%s: time %s, want %s", h.Name, h.ModTime, testCreated)
		}
		if h.Name != "home/nonroot/" && (h.Uid != 0 || h.Gid != 0) {
			t.Errorf("%s: owner %d:%d, want root", h.Name, h.Uid, h.Gid)
		}
	}
	want := []string{
		"etc/", "etc/group", "etc/nsswitch.conf", "etc/passwd",
		"home/", "home/nonroot/", "tmp/",
		"usr/", "usr/local/", "usr/local/bin/",
		"usr/local/bin/muster", "usr/local/bin/muster-podgrouper", "usr/local/bin/muster-scheduler",
		"usr/local/bin/kubectl-muster",
	}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("entries\n  %v\nwant\n  %v", names, want)
	}
	for _, tc := range []struct {
		name     string
		typeflag byte
		mode     int64
		uid      int
		link     string
	}{
		{"usr/local/bin/muster-scheduler", tar.TypeReg, 0o755, 0, ""},
		{"usr/local/bin/kubectl-muster", tar.TypeLink, 0, 0, "usr/local/bin/muster"},
		{"home/nonroot/", tar.TypeDir, 0o700, 65532, ""},
		{"tmp/", tar.TypeDir, 0o1777, 0, ""},
		{"etc/passwd", tar.TypeReg, 0o644, 0, ""},
	} {
		h := byName[tc.name]
		if h.Typeflag != tc.typeflag || h.Mode != tc.mode || h.Uid != tc.uid || h.Linkname != tc.link {
			t.Errorf("%s: type %c mode %o uid %d link %q, want %c %o %d %q", tc.name, h.Typeflag, h.Mode, h.Uid, h.Linkname, tc.typeflag, tc.mode, tc.uid, tc.link)
		}
	}
	if !strings.Contains(etcFiles["/etc/passwd"], "nonroot:x:65532:65532:") || !strings.HasPrefix(User, "65532:") {
		t.Errorf("the image user %s has no account in /etc/passwd", User)
	}
}

func TestLayerMissingBinary(t *testing.T) {
	dir := fakeBinaries(t, "a")
	if err := os.Remove(filepath.Join(dir, "muster-podgrouper")); err != nil {
		t.Fatal(err)
	}
	if _, err := Layer(dir, testCreated); err == nil || !strings.Contains(err.Error(), "muster-podgrouper") {
		t.Errorf("Layer without muster-podgrouper: err %v, want one naming it", err)
	}
}

// TestImageConfig: user, entrypoint, labels, platform, OCI media types.
func TestImageConfig(t *testing.T) {
	o := testOptions()
	p := v1.Platform{OS: "linux", Architecture: "arm64"}
	img, err := Image(o, p, fakeBinaries(t, "a"))
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Image(img); err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != "arm64" || !cf.Created.Time.Equal(testCreated) {
		t.Errorf("config os/arch/created = %s/%s/%s", cf.OS, cf.Architecture, cf.Created.Time)
	}
	c := cf.Config
	if c.User != "65532:65532" || !reflect.DeepEqual(c.Entrypoint, []string{"/usr/local/bin/muster-scheduler"}) || c.WorkingDir != "/home/nonroot" {
		t.Errorf("config user %q entrypoint %q workdir %q", c.User, c.Entrypoint, c.WorkingDir)
	}
	want := map[string]string{
		"org.opencontainers.image.source":      "https://github.com/muster-io/muster",
		"org.opencontainers.image.version":     "v1.2.3",
		"org.opencontainers.image.revision":    "0123abcd",
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.description": Description,
	}
	if !reflect.DeepEqual(c.Labels, want) {
		t.Errorf("labels %v, want %v", c.Labels, want)
	}
	for what, get := range map[string]func() (types.MediaType, error){
		"manifest": img.MediaType,
		"config": func() (types.MediaType, error) {
			m, err := img.Manifest()
			if err != nil {
				return "", err
			}
			return m.Config.MediaType, nil
		},
	} {
		mt, err := get()
		if err != nil {
			t.Fatal(err)
		}
		if !mt.IsImage() && !mt.IsConfig() || !strings.HasPrefix(string(mt), "application/vnd.oci.") {
			t.Errorf("%s media type %s, want OCI", what, mt)
		}
	}
	layer, err := Layer(fakeBinaries(t, "a"), testCreated)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := CompressedSize(img); err != nil || n != int64(len(layer)) {
		t.Errorf("CompressedSize %d (%v), want the layer's %d", n, err, len(layer))
	}
	if len(cf.History) != 1 || len(cf.RootFS.DiffIDs) != 1 {
		t.Errorf("history %v, diff IDs %v: want one layer", cf.History, cf.RootFS.DiffIDs)
	}
}

func sha(t *testing.T, file string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// buildIndex assembles the index of both platforms from bins.
func buildIndex(t *testing.T, o Options, bins string) v1.ImageIndex {
	t.Helper()
	var adds []mutate.IndexAddendum
	for _, p := range Platforms {
		img, err := Image(o, p, bins)
		if err != nil {
			t.Fatal(err)
		}
		add, err := IndexEntry(img, p)
		if err != nil {
			t.Fatal(err)
		}
		adds = append(adds, add)
	}
	return Index(o, adds...)
}

// TestReproducible: the same binaries (in another directory, with other
// file times) give the same digests and byte-identical archives; another
// binary, time or version gives another digest.
func TestReproducible(t *testing.T) {
	o := testOptions()
	binsA := fakeBinaries(t, "a")
	binsB := fakeBinaries(t, "a")
	if err := os.Chtimes(filepath.Join(binsB, "muster"), time.Now(), time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	idxA, idxB := buildIndex(t, o, binsA), buildIndex(t, o, binsB)
	dA, err := idxA.Digest()
	if err != nil {
		t.Fatal(err)
	}
	dB, err := idxB.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if dA != dB {
		t.Fatalf("same binaries, two digests: %s and %s", dA, dB)
	}
	outA, err := Write(t.TempDir(), idxA, o)
	if err != nil {
		t.Fatal(err)
	}
	outB, err := Write(t.TempDir(), idxB, o)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][2]string{"OCI archive": {outA.OCIArchive, outB.OCIArchive}}
	for p := range outA.DockerArchives {
		files[p] = [2]string{outA.DockerArchives[p], outB.DockerArchives[p]}
	}
	for what, f := range files {
		if sha(t, f[0]) != sha(t, f[1]) {
			t.Errorf("%s differs between two writes of the same image", what)
		}
	}

	for what, tc := range map[string]struct {
		o    Options
		bins string
	}{
		"another binary":  {o, fakeBinaries(t, "b")},
		"another time":    {Options{Version: o.Version, Revision: o.Revision, Created: o.Created.Add(time.Second)}, binsA},
		"another version": {Options{Version: "v1.2.4", Revision: o.Revision, Created: o.Created}, binsA},
	} {
		d, err := buildIndex(t, tc.o, tc.bins).Digest()
		if err != nil {
			t.Fatal(err)
		}
		if d == dA {
			t.Errorf("%s: the same digest %s", what, d)
		}
	}
}

// TestWriteAndReadBack: the layout holds the index under the image's
// name, the docker archives hold each platform's image under its tag,
// and the OCI archive is the layout's files.
func TestWriteAndReadBack(t *testing.T) {
	o := testOptions()
	idx := buildIndex(t, o, fakeBinaries(t, "a"))
	dir := t.TempDir()
	// A stale blob of an earlier build must not survive.
	if err := os.MkdirAll(filepath.Join(dir, "oci", "blobs", "sha256"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "oci", "blobs", "sha256", "stale"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := Write(dir, idx, o)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ReadLayout(out.Layout)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Index(back); err != nil {
		t.Fatal(err)
	}
	checkLayoutIndex(t, back, idx)
	checkDockerArchives(t, out, o, back)
	checkOCIArchive(t, out)
}

// checkLayoutIndex: the index read back from the layout is the one
// written, an OCI index with the image's annotations and one OCI image
// manifest per platform.
func checkLayoutIndex(t *testing.T, back, idx v1.ImageIndex) {
	t.Helper()
	want, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := back.Digest(); err != nil || got != want {
		t.Fatalf("layout index digest %s (%v), want %s", got, err, want)
	}
	m, err := back.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.OCIImageIndex || m.Annotations[LabelVersion] != "v1.2.3" || m.Annotations[LabelSource] != Source || m.Annotations[LabelCreated] != "2026-01-02T03:04:05Z" {
		t.Errorf("index media type %s annotations %v", m.MediaType, m.Annotations)
	}
	for i, d := range m.Manifests {
		if d.Platform == nil || PlatformString(*d.Platform) != PlatformString(Platforms[i]) || d.ArtifactType != "" || d.MediaType != types.OCIManifestSchema1 {
			t.Errorf("index entry %d: %+v, want an OCI image manifest of %s, no artifactType", i, d, PlatformString(Platforms[i]))
		}
	}
}

// checkDockerArchives: one docker archive per platform, each holding under
// the image's tag the same config and layer as the layout's image of that
// platform.
func checkDockerArchives(t *testing.T, out *Outputs, o Options, back v1.ImageIndex) {
	t.Helper()
	tag, err := o.Tag()
	if err != nil {
		t.Fatal(err)
	}
	if tag.String() != "ghcr.io/muster-io/muster:v1.2.3" {
		t.Errorf("tag %s", tag)
	}
	if len(out.DockerArchives) != len(Platforms) {
		t.Fatalf("docker archives %v, want one per platform", out.DockerArchives)
	}
	for _, p := range Platforms {
		img, err := tarball.ImageFromPath(out.DockerArchives[PlatformString(p)], &tag)
		if err != nil {
			t.Fatal(err)
		}
		fromIdx, err := PlatformImage(back, p)
		if err != nil {
			t.Fatal(err)
		}
		for what, get := range map[string]func(v1.Image) (v1.Hash, error){"config": v1.Image.ConfigName, "layer": firstLayerDigest} {
			a, errA := get(img)
			b, errB := get(fromIdx)
			if errA != nil || errB != nil || a != b {
				t.Errorf("%s: docker archive %s %s (%v), index %s (%v)", PlatformString(p), what, a, errA, b, errB)
			}
		}
	}
	if _, err := PlatformImage(back, v1.Platform{OS: "linux", Architecture: "s390x"}); !errors.Is(err, errNoImage) {
		t.Errorf("s390x: err %v, want errNoImage", err)
	}
}

// checkOCIArchive: the OCI archive holds exactly the layout's files,
// index.json at the root, and no stale blob of an earlier build.
func checkOCIArchive(t *testing.T, out *Outputs) {
	t.Helper()
	f, err := os.Open(out.OCIArchive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	archived := map[string]bool{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			archived[h.Name] = true
		}
	}
	onDisk := map[string]bool{}
	if err := filepath.WalkDir(out.Layout, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(out.Layout, p)
			onDisk[filepath.ToSlash(rel)] = true
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(archived, onDisk) || !archived["index.json"] || !archived["oci-layout"] || onDisk["blobs/sha256/stale"] {
		t.Errorf("OCI archive files %v, layout files %v", archived, onDisk)
	}
}

func firstLayerDigest(img v1.Image) (v1.Hash, error) {
	ls, err := img.Layers()
	if err != nil {
		return v1.Hash{}, err
	}
	if len(ls) != 1 {
		return v1.Hash{}, errors.New("not one layer")
	}
	return ls[0].Digest()
}

func TestTagFromVersion(t *testing.T) {
	for _, tc := range []struct {
		version string
		ok      bool
	}{
		{"v0.1.0", true},
		{"v0.1.0-3-g6a74e05-dirty", true},
		{"6a74e05", true},
		{"", false},
		{"v1+build", false},
	} {
		_, err := Options{Version: tc.version}.Tag()
		if (err == nil) != tc.ok {
			t.Errorf("version %q: err %v, want ok=%v", tc.version, err, tc.ok)
		}
	}
}
