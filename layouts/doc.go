// Package layouts describes the tiles mokc's kernels use and converts data
// into and out of them on the host, bit-exactly: CuTe-style shape:stride
// layouts and swizzles, BF16 tiles and shared-memory matrix descriptors for
// sm_80, sm_90a and sm_100a, MXFP8 (E4M3 data with UE8M0 block-32 scales, OCP
// Microscaling v1.0) and the sm_100 scale-factor tile layout. Codegen, the
// runtime (host packing of caller weights) and the CPU reference rely on
// it; it is pure Go and needs no GPU.
//
// # Layout algebra (CuTe)
//
// IntTuple, Layout (Shape:Stride, printed "(2,(2,2)):(4,(2,1))", parsed by
// ParseLayout), ColMajor, RowMajor, Layout.Offset / OffsetAt / OffsetCoord /
// Coord; Coalesce, Composition, Complement, RightInverse, LogicalDivide,
// ZippedDivide, LogicalProduct, BlockedProduct, RakedProduct, TileToShape,
// LocalTile, LocalPartition. Swizzle is CuTe's Swizzle<B,M,S>;
// SwizzleMode names the hardware modes (none, 32B, 64B, 128B) and
// SwizzleMode.Pattern gives their byte patterns (Sw<1,4,3>, Sw<2,4,3>,
// Sw<3,4,3>). Sources: CUTLASS cute/layout.hpp, cute/swizzle.hpp,
// media/docs/cpp/cute; PTX ISA 9.7.15.5.1 (swizzling modes).
//
// # BF16
//
// BF16FromF32 / F32FromBF16 and BF16FromF32Slice / F32FromBF16Slice: bf16
// travels as its uint16 bit pattern; f32 -> bf16 rounds to nearest even
// like cvt.rn.bf16.f32, every NaN becomes 0x7FFF.
//
// # Shared-memory operand tiles and descriptors
//
// NewSmemTile(target, operand, dtype, rows, K) gives the K-major tile of an
// MMA operand (A: M x K, B: N x K) for target.SM80 (ldmatrix-friendly XOR
// swizzle; SmemTile.LdmatrixX4Offsets; the sm_80 kernels pad rows instead,
// see PaddedTile), target.SM90a (wgmma canonical
// K-major, 128B swizzle when a row is a multiple of 128 bytes) and
// target.SM100a (tcgen05, same canonical layouts): SmemTile.Layout in CuTe
// notation, SmemTile.ByteOffset, and SmemTile.Descriptor / DescriptorFields
// for each (row group, k-step). The descriptor encoders are separate
// functions codegen calls directly: SM90SmemDescriptor (wgmma, PTX ISA
// 9.7.15.5.1.2.2) and SM100SmemDescriptor (tcgen05, PTX ISA 9.7.16.4.1),
// which differ in bits 46-48 (0b001 on sm_100) and the swizzle field, with
// their decoders; TCGen05InstrDescF16 and TCGen05InstrDescMXF8F6F4 encode
// the 32-bit tcgen05.mma instruction descriptors (PTX ISA 9.7.16.4.2). All
// are pinned by values worked out by hand from the ISA bit tables and by
// values computed with CUTLASS's bit-field unions (cute/arch/mma_sm100_desc.hpp:
// UMMA::SmemDescriptor, InstrDescriptor, InstrDescriptorBlockScaled).
//
// # The tiles of the grouped-GEMM kernels
//
// PlanGemmSmem(GemmConfig) is the one shared-memory plan of a grouped-GEMM
// CTA that codegen's atoms lay their kernels out with and that
// schedule.Schedule.Validate checks against the target: GemmOperandTiles
// gives the A and B tiles of a stage as OperandTile values (sm_80:
// PaddedTile, K-major rows padded by 16 bytes for conflict-free ldmatrix;
// sm_90a and sm_100a: SmemTile with the 128-byte swizzle TMA writes, in
// columns of AtomBytes), and the plan adds the stage bytes (MXFP8 scales
// included), the 1024-byte realignment, the mbarrier and sm_90a staging
// offsets, the totals (Required, Bytes) and the sm_100a TMEM columns.
// GateUpRows gives, as a Layout, which row of the expert's weight each
// B-tile row holds for plain GEMMs and for gated FC1s with gate/up halves or
// interleaved rows (GateUp). GemmSmem.Describe is what `mokc inspect layout
// --model M --target T` prints.
//
// # MXFP8
//
// E4M3FromF32 (the semantics of cvt.rn.satfinite.e4m3x2.f32: RNE, |x| > 448
// -> +-448, NaN -> 0x7F) and F32FromE4M3; UE8M0RoundUp (Transformer
// Engine's integer fallback = cvt.rp.satfinite.ue8m0x2), UE8M0RoundDown,
// F32FromUE8M0 (code 0 is 2^-127, 0xFF is NaN); ScaleFromAmax with
// ScaleRoundUp (default) or ScaleOCPFloor. Quantize / QuantizeBF16 turn an
// [E, rows, cols] tensor into an MXFP8 value (Data: E4M3 codes, Scales:
// UE8M0 codes) with blocks of 32 along cols (AlongCols) or rows
// (AlongRows), optionally stored transposed (the K-major copy a weight
// gradient needs: AlongRows + Transpose); MXFP8.QuantizeExpert streams one
// expert at a time; MXFP8.At / Dequantize go back to f32. Quantization runs
// on all cores with plain goroutines.
//
// # sm_100 scale-factor layout
//
// SFOffset gives the byte offset of a scale in the 128x4 tiles of 512 bytes
// that tcgen05 block-scaled MMAs read (cuBLAS documentation, "1D Block
// Scaling Factors Layout"; CUTLASS cutlass/detail/sm100_blockscaled_layout.hpp);
// SFAtomLayout / SFOperandLayout give it as CuTe layouts. SFLayout pads
// each expert's scales to whole tiles (rows per expert need not be
// multiples of 128, K need not be a multiple of 128): SFLayout.Pack,
// Unpack, Refresh (in place into a caller-owned buffer, same address, so
// captured CUDA graphs stay valid) and RefreshExpert; DequantizeSF reads
// values through the packed layout; padding bytes are SFPadByte (1.0, never
// NaN) and never reach a value. SM100ScaleTileDescriptor gives the
// tcgen05.cp source descriptor of one tile.
//
// # Units and conventions
//
// Layout offsets are in the unit of their strides (SmemTile.Layout: elements;
// SFOperandLayout: bytes). Byte addresses in descriptors are shared::cta
// addresses below 2^18, multiples of 16. Tensors are row-major unless a
// doc comment says otherwise. Bad input gives an error, never a panic.
//
// `mokc inspect layout` prints a tile's layout, swizzle and descriptors for
// a target, a layer's GEMM plans (--model: GemmSmem.Describe), or the
// scale-factor layout (SmemTile.Describe, PaddedTile.Describe,
// SFLayout.Describe).
package layouts
