package codegen

import (
	llir "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/metadata"
)

// kernelAnnotate adds !{ptr @f, !"kernel", i32 1} and !{ptr @f, !"maxntidx",
// i32 threads} to the module's !nvvm.annotations (the NVVM kernel
// convention, as in /tmp/ircontract: "Kernels").
func kernelAnnotate(m *llir.Module, f *llir.Func, threads int) {
	nd, ok := m.NamedMetadataDefs["nvvm.annotations"]
	if !ok {
		nd = &metadata.NamedDef{Name: "nvvm.annotations"}
		m.NamedMetadataDefs["nvvm.annotations"] = nd
	}
	add := func(key string, v int64) {
		t := &metadata.Tuple{MetadataID: metadata.MetadataID(len(m.MetadataDefs)), Fields: []metadata.Field{
			f, &metadata.String{Value: key}, I32c(v),
		}}
		m.MetadataDefs = append(m.MetadataDefs, t)
		nd.Nodes = append(nd.Nodes, t)
	}
	add("kernel", 1)
	if threads > 0 {
		add("maxntidx", int64(threads))
	}
}
