package runtime

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mokc/mokc/schedule"
)

// CompileFunc compiles layer l with schedule s into PTX text (every kernel
// of the forward in one module) and its launch manifest: the JSON of
// launch.Manifest (package compiler: codegen's launch plan joined with
// the PTX entries' parameter layouts).
type CompileFunc func(l schedule.Layer, s schedule.Schedule) (ptx string, manifest []byte, err error)

var (
	compilerMu      sync.RWMutex
	compilerVersion string
	compileFn       CompileFunc
)

// ErrNoCompiler is returned by NewLayer when no compiler has been
// registered with RegisterCompiler.
var ErrNoCompiler = errors.New("mokc runtime: NewLayer: no compiler registered (call runtime.RegisterCompiler(compiler.Version, ...) with package compiler, or use LoadLayer with PTX and a manifest)")

// RegisterCompiler sets the compiler NewLayer runs on a cache miss, and its
// version (compiler.Version), which is part of the compiled-module cache
// key. The runtime does not import the compiler itself: codegen's GPU tests
// import this package, and codegen importing it back would be an import
// cycle. The mokc command registers package compiler:
//
//	runtime.RegisterCompiler(compiler.Version, func(l schedule.Layer, s schedule.Schedule) (string, []byte, error) {
//		a, err := compiler.Compile(l, s)
//		if err != nil {
//			return "", nil, err
//		}
//		m, err := a.ManifestJSON()
//		return a.PTX.Text, m, err
//	})
//
// Registering again replaces the compiler and empties the in-memory cache.
func RegisterCompiler(version string, f CompileFunc) {
	compilerMu.Lock()
	compilerVersion, compileFn = version, f
	compilerMu.Unlock()
	memCache.Lock()
	memCache.m = map[string]compiledLayer{}
	memCache.Unlock()
}

// registeredCompiler returns the registered version and compiler (nil if none).
func registeredCompiler() (string, CompileFunc) {
	compilerMu.RLock()
	defer compilerMu.RUnlock()
	return compilerVersion, compileFn
}

// compiledLayer is a cache entry: the PTX and the manifest.
type compiledLayer struct {
	ptx      string
	manifest []byte
}

// memCache is the per-process compiled-module cache.
var memCache = struct {
	sync.Mutex
	m map[string]compiledLayer
}{m: map[string]compiledLayer{}}

// compiles counts the calls of the registered compiler (for tests).
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
// version). The version is the compiler's version and, for the disk cache,
// the SHA-256 of the running executable, so that a rebuilt mokc never reads
// PTX compiled by a different compiler even when the version constant was
// not bumped. exe is "" for the in-memory key.
func cacheKey(version, exe string, l schedule.Layer, s schedule.Schedule, driver int) string {
	h := sha256.New()
	// The variant is keyed by value: %#v of the pointer would print its
	// address.
	var variant schedule.TileVariant
	hasVariant := s.Variant != nil
	if hasVariant {
		variant = *s.Variant
	}
	s.Variant = nil
	fmt.Fprintf(h, "mokc %q\nexe %s\nlayer %#v\nschedule %#v\nvariant %t %#v\ntarget %s\ndriver %d\n",
		version, exe, l, s, hasVariant, variant, s.Target, driver)
	return hex.EncodeToString(h.Sum(nil))
}

// compileCached returns the PTX and manifest of (l, s): from the in-memory
// cache, else from the disk cache, else from the registered compiler (and
// stores the result in both). Disk cache failures are not errors: the cache
// is only an optimisation.
func compileCached(l schedule.Layer, s schedule.Schedule, driver int) (compiledLayer, error) {
	version, f := registeredCompiler()
	if f == nil {
		return compiledLayer{}, ErrNoCompiler
	}
	key := cacheKey(version, "", l, s, driver)
	memCache.Lock()
	c, ok := memCache.m[key]
	memCache.Unlock()
	if ok {
		return c, nil
	}
	dir, exe := cacheDir(), ""
	if dir != "" {
		exe = exeHash()
	}
	var diskKey string
	if dir != "" && exe != "" {
		diskKey = cacheKey(version, exe, l, s, driver)
		if c, ok := readDiskCache(dir, diskKey); ok {
			memCache.Lock()
			memCache.m[key] = c
			memCache.Unlock()
			return c, nil
		}
	}
	compiles.Add(1)
	ptxText, manifest, err := f(l, s)
	if err != nil {
		return compiledLayer{}, fmt.Errorf("mokc runtime: compiling %s for %s: %w", l.Name, s.Target, err)
	}
	c = compiledLayer{ptx: ptxText, manifest: manifest}
	memCache.Lock()
	memCache.m[key] = c
	memCache.Unlock()
	if diskKey != "" {
		writeDiskCache(dir, diskKey, c)
	}
	return c, nil
}

func readDiskCache(dir, key string) (compiledLayer, bool) {
	p, err := os.ReadFile(filepath.Join(dir, key+".ptx"))
	if err != nil || len(p) == 0 {
		return compiledLayer{}, false
	}
	m, err := os.ReadFile(filepath.Join(dir, key+".json"))
	if err != nil || len(m) == 0 {
		return compiledLayer{}, false
	}
	return compiledLayer{ptx: string(p), manifest: m}, true
}

// writeDiskCache writes the entry's two files, each through a temporary
// file and a rename so a concurrent reader never sees a partial file. The
// manifest is written last: readDiskCache needs both.
func writeDiskCache(dir, key string, c compiledLayer) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return
	}
	for _, f := range []struct {
		ext  string
		data []byte
	}{{".ptx", []byte(c.ptx)}, {".json", c.manifest}} {
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
