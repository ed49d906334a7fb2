package codegen

import (
	"fmt"

	"github.com/llir/llvm/ir/value"

	"github.com/mokc/mokc/ir"
)

// The inline PTX of the sm_80 warp-level tensor-core path (PTX ISA 9.7.9.25
// "cp.async", 9.7.14.5.15 "ldmatrix", 9.7.14.5.8 "mma.m16n8k16"), shared
// by the sm_80 GEMM atom and the weight-gradient kernel (both run on every
// target from sm_80 on). Shared addresses are 64-bit (ptrtoint of the
// dynamic shared memory).

// cpAsyncCommit closes the thread's current cp.async group.
func (b *Builder) cpAsyncCommit() { b.Asm("cp.async.commit_group;", "~{memory}") }

// cpAsyncWait waits until at most n of the thread's cp.async groups are
// pending.
func (b *Builder) cpAsyncWait(n int) { b.Asm(fmt.Sprintf("cp.async.wait_group %d;", n), "~{memory}") }

// cpAsync4 copies 4 bytes from global address src (i64, 4-byte aligned)
// to shared address dst (i32, 4-byte aligned) with cp.async.ca, reading
// srcBytes (i32, 4 or 0) bytes and zero-filling the rest (PTX ISA
// "cp.async": src-size; 0 reads nothing).
func (b *Builder) cpAsync4(dst, src, srcBytes value.Value) {
	b.Asm("cp.async.ca.shared.global [$0], [$1], 4, $2;", "r,l,r,~{memory}", dst, src, srcBytes)
}

// ldmatrixX4 loads four 8x8 b16 matrices from shared memory (lane l gives
// the address of row l%8 of matrix l/8; .trans delivers each transposed)
// and returns the thread's four registers. ldmatrix reads stages that
// cp.async.wait_group and bar.sync order: no memory clobber.
func (b *Builder) ldmatrixX4(addr value.Value, trans bool) [4]value.Value {
	op := "ldmatrix.sync.aligned.m8n8.x4.shared.b16"
	if trans {
		op = "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"
	}
	r := b.AsmCallNoMemory(op+" {$0, $1, $2, $3}, [$4];", "=r,=r,=r,=r,l", ir.Struct(ir.I32, ir.I32, ir.I32, ir.I32), addr)
	return [4]value.Value{b.ExtractValue(r, 0), b.ExtractValue(r, 1), b.ExtractValue(r, 2), b.ExtractValue(r, 3)}
}

// mmaBF16 is one mma.sync.m16n8k16 with bf16 A (row) and B (col)
// fragments and f32 accumulators: acc[0:4] += a·b, updated in place.
func (b *Builder) mmaBF16(a [4]value.Value, bf [2]value.Value, acc []value.Value) {
	r := b.AsmCallNoMemory("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, {$10, $11, $12, $13};",
		"=f,=f,=f,=f,r,r,r,r,r,r,f,f,f,f", ir.Struct(ir.F32, ir.F32, ir.F32, ir.F32),
		a[0], a[1], a[2], a[3], bf[0], bf[1], acc[0], acc[1], acc[2], acc[3])
	for x := 0; x < 4; x++ {
		acc[x] = b.ExtractValue(r, x)
	}
}
