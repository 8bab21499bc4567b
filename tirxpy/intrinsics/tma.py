"""TMA: cp.async.bulk.tensor 1D-5D loads (optionally multicast to a cluster, or for a 2-CTA
pair on Blackwell), stores, reductions and L2 prefetches; non-tensor bulk copies; bulk groups;
prefetch.tensormap (PTX ISA 9.7.9.25.5).

Coordinates are int32 element indices, innermost dimension first (``c0`` is the contiguous
dimension), exactly like the tensor map's dimensions.
"""
from .defs import gmem, imm, reg, row, smem, tmap


def _coords(d):
    ops = [reg(f"c{i}", "int32") for i in range(d)]
    text = "{" + ", ".join(f"{{c{i}}}" for i in range(d)) + "}"
    return ops, text


for _d in range(1, 6):
    _ops, _c = _coords(_d)
    row(f"tma_load_{_d}d",
        f"cp.async.bulk.tensor.{_d}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
        f"[{{dst}}], [{{tmap}}, {_c}], [{{bar}}];",
        [smem("dst"), tmap(), *_ops, smem("bar")], lowest="sm_90", ptx=f"cp.async.bulk.tensor.{_d}d (load)",
        doc=f"{_d}-D tile load global -> shared, completing bytes on the mbarrier bar.")
    row(f"tma_load_{_d}d_multicast",
        f"cp.async.bulk.tensor.{_d}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster "
        f"[{{dst}}], [{{tmap}}, {_c}], [{{bar}}], {{cta_mask}};",
        [smem("dst"), tmap(), *_ops, smem("bar"), reg("cta_mask", "uint16")], lowest="sm_90a",
        ptx=f"cp.async.bulk.tensor.{_d}d.multicast::cluster",
        doc="The same tile lands at the same offset in every CTA of cta_mask, each completing on its own bar.")
    row(f"tma_load_{_d}d_cta_group2",
        f"cp.async.bulk.tensor.{_d}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.cta_group::2 "
        f"[{{dst}}], [{{tmap}}, {_c}], [{{bar}}];",
        [smem("dst"), tmap(), *_ops, smem("bar")], lowest="sm_100a", ptx=f"cp.async.bulk.tensor.{_d}d.cta_group::2",
        doc="Load for a 2-CTA tcgen05 pair: bar may be the peer CTA's barrier (shared::cluster address).")
    row(f"tma_store_{_d}d",
        f"cp.async.bulk.tensor.{_d}d.global.shared::cta.tile.bulk_group [{{tmap}}, {_c}], [{{src}}];",
        [tmap(access="w"), *_ops, smem("src")], lowest="sm_90", ptx=f"cp.async.bulk.tensor.{_d}d (store)")
    row(f"tma_reduce_add_{_d}d",
        f"cp.reduce.async.bulk.tensor.{_d}d.global.shared::cta.add.tile.bulk_group [{{tmap}}, {_c}], [{{src}}];",
        [tmap(access="w"), *_ops, smem("src")], lowest="sm_90", ptx=f"cp.reduce.async.bulk.tensor.{_d}d.add")
    row(f"tma_prefetch_{_d}d", f"cp.async.bulk.prefetch.tensor.{_d}d.L2.global.tile [{{tmap}}, {_c}];",
        [tmap(), *_ops], lowest="sm_90", ptx=f"cp.async.bulk.prefetch.tensor.{_d}d")

row("bulk_copy_g2s",
    "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [{dst}], [{src}], {nbytes}, [{bar}];",
    [smem("dst"), gmem("src"), reg("nbytes"), smem("bar")], lowest="sm_90",
    checks=[lambda k: None if k["nbytes"] % 16 == 0 else f"nbytes = {k['nbytes']} must be a multiple of 16"])
row("bulk_copy_s2g", "cp.async.bulk.global.shared::cta.bulk_group [{dst}], [{src}], {nbytes};",
    [gmem("dst", "w"), smem("src"), reg("nbytes")], lowest="sm_90",
    checks=[lambda k: None if k["nbytes"] % 16 == 0 else f"nbytes = {k['nbytes']} must be a multiple of 16"])
row("bulk_commit_group", "cp.async.bulk.commit_group;", lowest="sm_90")
row("bulk_wait_group", "cp.async.bulk.wait_group {n};", [imm("n", range(0, 8))], lowest="sm_90")
row("bulk_wait_group_read", "cp.async.bulk.wait_group.read {n};", [imm("n", range(0, 8))], lowest="sm_90",
    doc="Wait until the shared-memory sources of all but n bulk groups may be overwritten.")
row("prefetch_tensormap", "prefetch.tensormap [{tmap}];", [tmap()], lowest="sm_90")
