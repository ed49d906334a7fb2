package schedule

import (
	"fmt"

	"github.com/mokc/mokc/target"
)

// The limits of Layer.Validate: the largest sizes the kernels of package
// codegen handle. Each is far above every model of Presets and of the
// Hugging Face configs mokc reads (the largest: H = 7168 DeepSeek-V3 and
// Kimi-K2, I = 14336 Mixtral, S*I_s = 20480 Qwen2-57B-A14B, E = 384
// Kimi-K2, K = 8), and small enough that no index the kernels compute in
// 32 bits can wrap and no layer is accepted whose weights fit no GPU.
const (
	// MaxTopK bounds Layer.TopK. moe_combine unrolls the K slots of a token
	// and keeps each slot's row and weight in registers across the whole
	// output row: ptxas 12.5 gives it 128 registers per thread at K = 32
	// and 254 at K = 64 (sm_90a), the most a thread of its 256-thread block
	// can have (65536 per SM), and spills to local memory at K = 128. 32
	// leaves half the register file and is four times the top-k of every
	// model mokc has a preset for.
	MaxTopK = 32
	// MaxExperts bounds Layer.Experts. moe_permute runs one block per
	// expert, each reading all T*K slot ids, and the routed GEMMs' tile
	// lists hold up to E tiles more than T*K/M; with MaxHidden and
	// MaxIntermediate, E tiles times the column blocks of a GEMM (at most
	// 2*65536/16 = 8192) stay below 2^29, so a work-item index of the
	// persistent engines leaves room for T (Schedule.MaxTokens). 65536 is
	// 128 times the most experts of a released model (512).
	MaxExperts = 1 << 16
	// MaxHidden bounds Layer.Hidden (H) and MaxIntermediate bounds
	// Layer.Intermediate (I) and the total shared width S*I_s: a GEMM then
	// has at most 2*65536/16 = 8192 column blocks (FC1 tiles are at least
	// 16 columns wide, FC2 tiles 8), well inside the 65535 blocks of an
	// sm_80 grid's y dimension and the i32 work-item index, and one
	// expert's FC1 (2I x H bf16, 16 GiB at the limit) keeps its byte
	// offsets and TMA strides (below 2^40 bytes) in range. At least three
	// times the largest sizes of the presets (H 7168, I 14336, shared width
	// 20480), as a power of two.
	MaxHidden = 1 << 16
	// MaxIntermediate bounds Layer.Intermediate and the total shared width
	// Layer.SharedExperts*Layer.SharedIntermediate, for the reasons of
	// MaxHidden.
	MaxIntermediate = 1 << 16
	// MaxSharedExperts bounds Layer.SharedExperts (S); S*I_s is bounded by
	// MaxIntermediate.
	MaxSharedExperts = 64
)

// indexLimit is the largest value of an i32 the kernels compute from T:
// slot indices t*K+k, routed rows, tile lists and the work items of the
// persistent GEMMs. It is 2^31 - 2^16 so that a loop's last step (a
// persistent grid of at most 65535 CTAs, or moe_permute's 2048 slots per
// pass) cannot wrap past 2^31 - 1.
const indexLimit = 1<<31 - 1<<16

// WeightBytes is the device memory of the layer's weights in bytes: the
// routed experts' FC1 and FC2 (E*3*I*H elements of 2 bytes, or 1 byte plus
// one scale byte per 32 elements for mxfp8), their biases (fp32, E*(2I+H)),
// the shared experts (3*S*I_s*H bf16) and the shared gate (H bf16). The
// layer's sizes must be within the limits of Validate (the product is
// computed in int64).
func (l Layer) WeightBytes() int64 {
	H, I, E, Is := int64(l.Hidden), int64(l.Intermediate), int64(l.Experts), int64(l.SharedWidth())
	elems := E * 3 * I * H
	routed := 2 * elems
	if l.Precision == MXFP8 {
		routed = elems + elems/32
	}
	if l.Biases {
		routed += 4 * E * (2*I + H)
	}
	shared := 2 * 3 * Is * H
	if l.SharedGate {
		shared += 2 * H
	}
	return routed + shared
}

// validateLimits checks the sizes against MaxHidden, MaxIntermediate,
// MaxExperts, MaxTopK and MaxSharedExperts, then the weights against the
// memory of the largest GPU mokc targets (target.MaxMemoryBytes). It runs
// before any other rule so that nothing after it sees an absurd size.
func (l Layer) validateLimits() error {
	for _, c := range []struct {
		field string
		v     int
		max   int
		why   string
	}{
		{"Layer.Hidden", l.Hidden, MaxHidden, "GEMM column blocks and 32-bit indices"},
		{"Layer.Intermediate", l.Intermediate, MaxIntermediate, "GEMM column blocks and 32-bit indices"},
		{"Layer.Experts", l.Experts, MaxExperts, "one dispatch block per expert, 32-bit GEMM work items"},
		{"Layer.TopK", l.TopK, MaxTopK, "the combine keeps every slot of a token in registers"},
	} {
		if c.v <= 0 {
			return fieldErr(c.field, c.v, "must be > 0")
		}
		if c.v > c.max {
			return fieldErr(c.field, c.v, "must be <= %d (%s)", c.max, c.why)
		}
	}
	if l.SharedExperts < 0 || l.SharedExperts > MaxSharedExperts {
		return fieldErr("Layer.SharedExperts", l.SharedExperts, "must be in 0..%d", MaxSharedExperts)
	}
	if l.SharedExperts > 0 {
		if l.SharedIntermediate <= 0 {
			return fieldErr("Layer.SharedIntermediate", l.SharedIntermediate, "must be > 0")
		}
		if l.SharedIntermediate > MaxIntermediate/l.SharedExperts {
			return fieldErr("Layer.SharedIntermediate", l.SharedIntermediate,
				"Layer.SharedExperts (%d) x Layer.SharedIntermediate must be <= %d (GEMM column blocks and 32-bit indices)",
				l.SharedExperts, MaxIntermediate)
		}
	}
	if w, lim := l.WeightBytes(), target.MaxMemoryBytes(); w > lim {
		return fieldErr("Layer.Experts", l.Experts, "the weights take %s, more than the %s of the largest GPU mokc targets",
			gigabytes(w), gigabytes(lim))
	}
	return nil
}

// gigabytes formats n bytes as "N.N GB" (10^9 bytes).
func gigabytes(n int64) string { return fmt.Sprintf("%.1f GB", float64(n)/1e9) }

// MaxTokens is the largest token count T the kernels handle for this
// layer whatever the schedule: T*K slot indices (and the routed rows, at
// most T*K) are i32 and stay below 2^31 - 2^16; for mxfp8, the quantize
// kernels' threads, one per 8 elements of the routed rows of x or h (T*K
// rows of H or I) and numbered by an unsigned i32, are at most
// 2^32 - 2^16.
// Schedule.MaxTokens adds the limits of the GEMM tiles. 0 for a layer
// without valid sizes.
func (l Layer) MaxTokens() int {
	if l.TopK <= 0 {
		return 0
	}
	T := indexLimit / l.TopK
	if w := max(l.Hidden, l.Intermediate); l.Precision == MXFP8 && w > 0 {
		T = min(T, int((1<<32-1<<16)/(int64(w)/8*int64(l.TopK))))
	}
	return T
}

// MaxTokens is the largest token count T the kernels of schedule s handle
// for layer l: Layer.MaxTokens, and for every GEMM (FC1, FC2, the variant's,
// the shared experts') the number of work items, tiles x column blocks,
// below 2^31 - 2^16 (an i32 in the persistent engines; the blocks of the
// sm_80 grid). A routed GEMM has at most ceil(T*K/M) + E row tiles, a
// shared one ceil(T/M). 0 when l or s is not valid.
func (s Schedule) MaxTokens(l Layer) int {
	if s.Validate(l) != nil {
		return 0
	}
	T := l.MaxTokens()
	routed := func(t Tile, n int) {
		blocks := (n + t.N - 1) / t.N
		if rows := (indexLimit/blocks - l.Experts) * t.M; rows < T*l.TopK {
			T = max(rows/l.TopK, 0)
		}
	}
	sharedGEMM := func(t Tile, n int) {
		blocks := (n + t.N - 1) / t.N
		T = min(T, indexLimit/blocks*t.M)
	}
	// FC1 tiles count gate and up columns: 2I (2*S*I_s) output columns.
	routed(s.FC1, 2*l.Intermediate)
	routed(s.FC2, l.Hidden)
	if v := s.Variant; v != nil {
		routed(v.FC1, 2*l.Intermediate)
		routed(v.FC2, l.Hidden)
	}
	// (the Decode tiles run at T <= MaxRows*E/K only, far below the
	// limit their items set)
	if r := s.FC2Large; r.Set() {
		routed(r.Tile, l.Hidden)
	}
	if l.SharedExperts > 0 {
		sharedGEMM(s.FC1, 2*l.SharedWidth())
		sharedGEMM(s.FC2, l.Hidden)
	}
	return T
}
