package ptx

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	llir "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/metadata"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
)

// annotations are a function's !nvvm.annotations entries: each entry is a
// tuple !{<fn>, !"key", i32 value, !"key", i32 value, ...} (LLVM NVPTX usage;
// "kernel" = 1 marks a kernel).
type annotations struct {
	kernel         bool
	maxntid        [3]int // maxntidx/y/z  -> .maxntid
	reqntid        [3]int // reqntidx/y/z  -> .reqntid
	minctasm       int    // minctasm      -> .minnctapersm
	maxnreg        int    // maxnreg       -> .maxnreg
	cluster        [3]int // cluster_dim_x/y/z -> .reqnctapercluster
	maxclusterrank int    // cluster_max_blocks -> .maxclusterrank
}

func parseAnnotations(m *llir.Module) (map[*llir.Func]*annotations, error) {
	out := map[*llir.Func]*annotations{}
	nd, ok := m.NamedMetadataDefs["nvvm.annotations"]
	if !ok {
		return out, nil
	}
	for _, node := range nd.Nodes {
		tup, ok := node.(*metadata.Tuple)
		if !ok || len(tup.Fields) == 0 {
			continue
		}
		f := annotatedFunc(tup.Fields[0])
		if f == nil {
			continue // annotations of globals (e.g. "managed") are not ours
		}
		a := out[f]
		if a == nil {
			a = &annotations{}
			out[f] = a
		}
		if (len(tup.Fields)-1)%2 != 0 {
			return nil, &Error{Func: f.Name(), Msg: "malformed !nvvm.annotations entry (want key/value pairs): " + tup.String()}
		}
		for i := 1; i+1 < len(tup.Fields); i += 2 {
			key, ok := tup.Fields[i].(*metadata.String)
			if !ok {
				return nil, &Error{Func: f.Name(), Msg: "malformed !nvvm.annotations entry (key is not a string): " + tup.String()}
			}
			if !knownAnnotations[key.Value] {
				// e.g. "grid_constant" (a tuple of parameter indices): the
				// backend always addresses byval kernel parameters in place.
				continue
			}
			ci, ok := tup.Fields[i+1].(*constant.Int)
			if !ok {
				return nil, &Error{Func: f.Name(), Msg: fmt.Sprintf("!nvvm.annotations %q: value is not an integer constant", key.Value)}
			}
			if !ci.X.IsInt64() || ci.X.Int64() < 0 || ci.X.Int64() > 1<<31-1 {
				return nil, &Error{Func: f.Name(), Msg: fmt.Sprintf("!nvvm.annotations %q: value %s out of range", key.Value, ci.X)}
			}
			v := int(ci.X.Int64())
			switch key.Value {
			case "kernel":
				a.kernel = v == 1
			case "maxntidx":
				a.maxntid[0] = v
			case "maxntidy":
				a.maxntid[1] = v
			case "maxntidz":
				a.maxntid[2] = v
			case "reqntidx":
				a.reqntid[0] = v
			case "reqntidy":
				a.reqntid[1] = v
			case "reqntidz":
				a.reqntid[2] = v
			case "minctasm":
				a.minctasm = v
			case "maxnreg":
				a.maxnreg = v
			case "cluster_dim_x":
				a.cluster[0] = v
			case "cluster_dim_y":
				a.cluster[1] = v
			case "cluster_dim_z":
				a.cluster[2] = v
			case "cluster_max_blocks":
				a.maxclusterrank = v
			}
		}
	}
	return out, nil
}

var knownAnnotations = map[string]bool{
	"kernel": true, "maxntidx": true, "maxntidy": true, "maxntidz": true,
	"reqntidx": true, "reqntidy": true, "reqntidz": true, "minctasm": true, "maxnreg": true,
	"cluster_dim_x": true, "cluster_dim_y": true, "cluster_dim_z": true, "cluster_max_blocks": true,
}

func annotatedFunc(f metadata.Field) *llir.Func {
	switch v := f.(type) {
	case *llir.Func:
		return v
	case *constant.ExprBitCast:
		return annotatedFunc(v.From)
	case *metadata.Value:
		if fn, ok := v.Value.(metadata.Field); ok {
			return annotatedFunc(fn)
		}
	}
	return nil
}

var ptxIdent = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$]*$`)

// symbolName maps an LLVM global name to a PTX identifier the way LLVM's
// NVPTXAssignValidGlobalNames does: characters outside [A-Za-z0-9_$] become
// "_$_"; unnamed globals become __unnamed_<id>.
func symbolName(name string, id int64) string {
	if name == "" {
		return fmt.Sprintf("__unnamed_%d", id)
	}
	if ptxIdent.MatchString(name) {
		return name
	}
	var b strings.Builder
	for i, r := range name {
		ok := r == '_' || r == '$' || (r >= 'A' && r <= 'Z') || (r >= 'a' && r <= 'z') || (i > 0 && r >= '0' && r <= '9')
		if ok {
			b.WriteRune(r)
		} else {
			b.WriteString("_$_")
		}
	}
	return b.String()
}

// buildCFG parses annotations, names every module symbol, and builds one
// machine function per defined function with blocks mirroring the IR.
func buildCFG(c *compilation) error {
	var err error
	if c.annots, err = parseAnnotations(c.mod); err != nil {
		return err
	}
	c.syms = map[value.Value]string{}
	c.symUsed = map[string]bool{}
	c.byIR = map[*llir.Func]*mfunc{}
	claim := func(v value.Value, ident string, name string, id int64, mustKeep bool) error {
		s := symbolName(name, id)
		if mustKeep && s != name {
			return &Error{Func: name, Msg: "kernel name is not a PTX identifier ([A-Za-z_$][A-Za-z0-9_$]*)"}
		}
		if c.symUsed[s] {
			return &Error{Msg: fmt.Sprintf("%s and another symbol both map to the PTX name %q", ident, s)}
		}
		c.symUsed[s] = true
		c.syms[v] = s
		return nil
	}
	for _, g := range c.mod.Globals {
		if err := claim(g, g.Ident(), g.GlobalName, g.GlobalID, false); err != nil {
			return err
		}
	}
	for _, f := range c.mod.Funcs {
		if len(f.Blocks) == 0 {
			continue
		}
		a := c.annots[f]
		if a == nil {
			a = &annotations{}
		}
		kernel := a.kernel || f.CallingConv == enum.CallingConvPTXKernel
		if err := claim(f, f.Ident(), f.GlobalName, f.GlobalID, kernel); err != nil {
			return err
		}
		mf := &mfunc{ir: f, name: c.syms[f], index: len(c.funcs), kernel: kernel, annot: a, blockOf: map[*llir.Block]*mblock{}}
		if !kernel && (a.maxntid != [3]int{} || a.minctasm != 0 || a.maxnreg != 0 || a.cluster != [3]int{}) {
			return mf.errorf(nil, "launch-bound annotations on a function that is not a kernel")
		}
		if kernel {
			if _, ok := f.Sig.RetType.(*types.VoidType); !ok {
				return mf.errorf(nil, "a kernel must return void, not %s", f.Sig.RetType)
			}
			if a.cluster != [3]int{} && c.target.ComputeCapability() < 90 {
				return mf.errorf(nil, "cluster_dim annotations need sm_90a or newer, not %s", c.target)
			}
		}
		for _, b := range f.Blocks {
			mb := &mblock{ir: b, origin: b, term: b.Term, retarget: map[*llir.Block]*mblock{}}
			inPhis := true
			for _, inst := range b.Insts {
				if phi, ok := inst.(*llir.InstPhi); ok {
					if !inPhis {
						return mf.errorf(phi, "phi after a non-phi instruction")
					}
					mb.phis = append(mb.phis, phi)
					continue
				}
				inPhis = false
				mb.insts = append(mb.insts, inst)
			}
			mf.blocks = append(mf.blocks, mb)
			mf.blockOf[b] = mb
		}
		preds, err := mf.preds()
		if err != nil {
			return mf.errorf(nil, "%v", err)
		}
		if len(preds[mf.blocks[0]]) > 0 {
			return mf.errorf(nil, "the entry block %s has predecessors", f.Blocks[0].Ident())
		}
		if len(mf.blocks[0].phis) > 0 {
			return mf.errorf(mf.blocks[0].phis[0], "phi in the entry block")
		}
		c.funcs = append(c.funcs, mf)
		c.byIR[f] = mf
	}
	for _, f := range c.funcs {
		f.assignLabels()
	}
	return nil
}

func (f *mfunc) assignLabels() {
	for i, b := range f.blocks {
		b.label = fmt.Sprintf("$L__BB%d_%d", f.index, i)
	}
}

func checkCFG(c *compilation) error {
	for _, f := range c.funcs {
		if len(f.blocks) == 0 {
			return fmt.Errorf("@%s has no blocks", f.ir.Name())
		}
		for _, b := range f.blocks {
			if b.ir == nil || b.term == nil {
				return fmt.Errorf("@%s: block without IR block or terminator", f.ir.Name())
			}
			if _, err := f.succs(b); err != nil {
				return err
			}
		}
	}
	return nil
}

// eachFuncPreds runs pass on every function of c with its predecessor map
// (mfunc.preds), stopping at the first error.
func eachFuncPreds(c *compilation, pass func(f *mfunc, preds map[*mblock][]*mblock) error) error {
	for _, f := range c.funcs {
		preds, err := f.preds()
		if err != nil {
			return err
		}
		if err := pass(f, preds); err != nil {
			return err
		}
	}
	return nil
}

// splitCriticalEdges puts a new block on each edge p->s where p has more than
// one distinct successor, s more than one distinct predecessor, and s has
// phis: after it, every phi copy has a place that runs exactly on its edge.
// The edge block sits right after p in the layout and jumps to s.
func splitCriticalEdges(c *compilation) error {
	return eachFuncPreds(c, func(f *mfunc, preds map[*mblock][]*mblock) error {
		var layout []*mblock
		for _, p := range f.blocks {
			layout = append(layout, p)
			succs, err := f.succs(p)
			if err != nil {
				return err
			}
			if len(succs) < 2 {
				continue
			}
			for _, s := range succs {
				if len(s.phis) == 0 || len(preds[s]) < 2 {
					continue
				}
				e := &mblock{origin: p.origin, jump: s}
				p.retarget[s.ir] = e
				layout = append(layout, e)
			}
		}
		f.blocks = layout
		f.assignLabels()
		return nil
	})
}

func checkNoCriticalEdges(c *compilation) error {
	return eachFuncPreds(c, func(f *mfunc, preds map[*mblock][]*mblock) error {
		for _, p := range f.blocks {
			succs, _ := f.succs(p)
			for _, s := range succs {
				if len(succs) > 1 && len(preds[s]) > 1 && len(s.phis) > 0 {
					return fmt.Errorf("@%s: critical edge %s -> %s into a block with phis", f.ir.Name(), p.label, s.label)
				}
			}
		}
		return nil
	})
}

// eliminatePhis turns the phis of each block s into one parallel copy per
// incoming edge: at the start of s when s has a single predecessor, else at
// the end of each predecessor (which, after split-critical-edges, has s as
// its only successor). Copies of one edge happen simultaneously (isel
// sequentializes them, breaking cycles such as swaps with a temporary), and
// every phi keeps its own registers, so neither the swap problem nor the
// lost-copy problem can arise.
func eliminatePhis(c *compilation) error {
	return eachFuncPreds(c, func(f *mfunc, preds map[*mblock][]*mblock) error {
		for _, s := range f.blocks {
			if len(s.phis) == 0 {
				continue
			}
			ps := preds[s]
			for _, p := range ps {
				var group []pcopy
				for _, phi := range s.phis {
					var src value.Value
					for _, inc := range phi.Incs {
						if inc.Pred != value.Value(p.origin) {
							continue
						}
						if src != nil && src != inc.X && src.Ident() != inc.X.Ident() {
							return f.errorf(phi, "phi has different values for the same predecessor %s", p.origin.Ident())
						}
						src = inc.X
					}
					if src == nil {
						return f.errorf(phi, "phi has no value for predecessor %s", p.origin.Ident())
					}
					group = append(group, pcopy{dst: phi, src: src})
				}
				if len(ps) == 1 {
					s.startCopies = append(s.startCopies, group...)
				} else {
					p.endCopies = append(p.endCopies, group...)
				}
			}
			s.phis = nil
		}
		return nil
	})
}

func checkPhiCopies(c *compilation) error {
	return eachFuncPreds(c, func(f *mfunc, preds map[*mblock][]*mblock) error {
		// Every phi of the IR gets exactly one copy per distinct predecessor.
		want := map[*llir.InstPhi]int{}
		for _, b := range f.blocks {
			if len(b.phis) > 0 {
				return fmt.Errorf("@%s: phis left in %s", f.ir.Name(), b.label)
			}
			for _, inst := range b.insts {
				if _, ok := inst.(*llir.InstPhi); ok {
					return fmt.Errorf("@%s: phi among the instructions of %s", f.ir.Name(), b.label)
				}
			}
			if b.ir != nil {
				for _, inst := range b.ir.Insts {
					if phi, ok := inst.(*llir.InstPhi); ok {
						want[phi] = len(preds[b])
					}
				}
			}
		}
		got := map[*llir.InstPhi]int{}
		for _, b := range f.blocks {
			succs, _ := f.succs(b)
			if len(b.endCopies) > 0 && len(succs) != 1 {
				return fmt.Errorf("@%s: %s ends with phi copies but has %d successors", f.ir.Name(), b.label, len(succs))
			}
			if len(b.startCopies) > 0 && len(preds[b]) != 1 {
				return fmt.Errorf("@%s: %s starts with phi copies but has %d predecessors", f.ir.Name(), b.label, len(preds[b]))
			}
			seen := map[*llir.InstPhi]bool{}
			for _, cp := range append(append([]pcopy{}, b.startCopies...), b.endCopies...) {
				if seen[cp.dst] {
					return fmt.Errorf("@%s: %s copies into %s twice", f.ir.Name(), b.label, cp.dst.Ident())
				}
				seen[cp.dst] = true
				got[cp.dst]++
			}
		}
		var bad []string
		for phi, n := range want {
			if got[phi] != n {
				bad = append(bad, fmt.Sprintf("%s: %d copies for %d predecessors", phi.Ident(), got[phi], n))
			}
		}
		if len(bad) > 0 {
			sort.Strings(bad)
			return fmt.Errorf("@%s: %s", f.ir.Name(), strings.Join(bad, "; "))
		}
		return nil
	})
}
