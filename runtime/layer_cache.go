package runtime

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mokc/mokc/compiler"
	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/schedule"
)

// compiled is one compiled layer: the PTX text of its forward (every
// kernel in one module) and its launch manifest.
type compiled struct {
	ptx      string
	manifest *launch.Manifest
}

// compileLayer compiles l with s through package compiler on a cache miss
// (the backward program when backward is set); tests substitute a
// stand-in.
var compileLayer = func(l schedule.Layer, s schedule.Schedule, backward bool) (compiled, error) {
	compile := compiler.Compile
	if backward {
		compile = compiler.CompileBackward
	}
	a, err := compile(l, s)
	if err != nil {
		return compiled{}, err
	}
	return compiled{ptx: a.PTX.Text, manifest: &a.Manifest}, nil
}

// memCache is the per-process compiled-module cache. Its manifests are
// shared by every Layer loaded from them, read-only.
var memCache = struct {
	sync.Mutex
	m map[string]compiled
}{m: map[string]compiled{}}

// compiles counts the calls of compileLayer (for tests).
var compiles atomic.Int64

// CacheDirEnv names the environment variable that sets the on-disk
// compiled-module cache directory; "off" disables the disk cache. Unset, the
// cache lives in os.UserCacheDir()/mokc (e.g. ~/.cache/mokc).
const CacheDirEnv = "MOKC_CACHE_DIR"

// cacheDir returns the disk cache directory, or "" when it is disabled or
// there is no user cache directory.
func cacheDir() string {
	if d, ok := os.LookupEnv(CacheDirEnv); ok {
		if d == "off" || d == "" {
			return ""
		}
		return d
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "mokc")
}

var exeHash = sync.OnceValue(func() string {
	path, err := os.Executable()
	if err != nil {
		return ""
	}
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
})

// cacheKey returns the key of (mokc version, layer, schedule, target, driver
// version). The version is compiler.Version and, for the disk cache, the
// SHA-256 of the running executable, so that a rebuilt mokc never reads PTX
// compiled by a different compiler even when the version constant was not
// bumped. exe is "" for the in-memory key.
func cacheKey(version, exe string, l schedule.Layer, s schedule.Schedule, driverVersion int) string {
	h := sha256.New()
	// The variants are keyed by value: %#v of a pointer would print its
	// address.
	byValue := func(v *schedule.TileVariant) (schedule.TileVariant, bool) {
		if v == nil {
			return schedule.TileVariant{}, false
		}
		return *v, true
	}
	variant, hasVariant := byValue(s.Variant)
	decode, hasDecode := byValue(s.Decode)
	s.Variant, s.Decode = nil, nil
	fmt.Fprintf(h, "mokc %q\nexe %s\nlayer %#v\nschedule %#v\nvariant %t %#v\ndecode %t %#v\ntarget %s\ndriver %d\n",
		version, exe, l, s, hasVariant, variant, hasDecode, decode, s.Target, driverVersion)
	return hex.EncodeToString(h.Sum(nil))
}

// compileCached returns the PTX and manifest of (l, s) for the driver
// version driverVersion, the forward or (backward) the backward program:
// from the in-memory cache, else from the disk cache, else from
// compileLayer (and stores the result in both). The key holds
// compiler.Version and the pass. Disk cache failures are not errors (an entry that
// cannot be read or decoded is a miss): the cache is only an optimisation.
func compileCached(l schedule.Layer, s schedule.Schedule, driverVersion int, backward bool) (compiled, error) {
	version := compiler.Version
	if backward {
		version += " backward"
	}
	key := cacheKey(version, "", l, s, driverVersion)
	memCache.Lock()
	c, ok := memCache.m[key]
	memCache.Unlock()
	if ok {
		return c, nil
	}
	remember := func(c compiled) {
		memCache.Lock()
		memCache.m[key] = c
		memCache.Unlock()
	}
	dir, exe := cacheDir(), ""
	if dir != "" {
		exe = exeHash()
	}
	var diskKey string
	if dir != "" && exe != "" {
		diskKey = cacheKey(version, exe, l, s, driverVersion)
		if c, ok := readDiskCache(dir, diskKey); ok {
			remember(c)
			return c, nil
		}
	}
	compiles.Add(1)
	c, err := compileLayer(l, s, backward)
	if err != nil {
		return compiled{}, fmt.Errorf("mokc runtime: compiling %s for %s: %w", l.Name, s.Target, err)
	}
	remember(c)
	if diskKey != "" {
		writeDiskCache(dir, diskKey, c)
	}
	return c, nil
}

// readDiskCache reads the entry key of dir: key.ptx and key.json, the
// manifest's JSON (decodeManifest).
func readDiskCache(dir, key string) (compiled, bool) {
	p, err := os.ReadFile(filepath.Join(dir, key+".ptx"))
	if err != nil || len(p) == 0 {
		return compiled{}, false
	}
	b, err := os.ReadFile(filepath.Join(dir, key+".json"))
	if err != nil || len(b) == 0 {
		return compiled{}, false
	}
	m, err := decodeManifest(b)
	if err != nil {
		return compiled{}, false
	}
	return compiled{ptx: string(p), manifest: m}, true
}

// writeDiskCache writes the entry's two files, each through a temporary
// file and a rename so a concurrent reader never sees a partial file. The
// manifest is written last: readDiskCache needs both.
func writeDiskCache(dir, key string, c compiled) {
	m, err := json.Marshal(c.manifest)
	if err != nil {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return
	}
	for _, f := range []struct {
		ext  string
		data []byte
	}{{".ptx", []byte(c.ptx)}, {".json", m}} {
		tmp, err := os.CreateTemp(dir, key+".tmp*")
		if err != nil {
			return
		}
		_, werr := tmp.Write(f.data)
		cerr := tmp.Close()
		if werr != nil || cerr != nil || os.Rename(tmp.Name(), filepath.Join(dir, key+f.ext)) != nil {
			os.Remove(tmp.Name())
			return
		}
	}
}

// cacheFiles lists the entries of the disk cache directory (for tests).
func cacheFiles(dir string) []string {
	es, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range es {
		if !strings.Contains(e.Name(), ".tmp") {
			out = append(out, e.Name())
		}
	}
	return out
}
