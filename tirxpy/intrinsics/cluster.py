"""Cluster: CTA ids, shared::cluster addressing (mapa), programmatic dependent launch
(griddepcontrol) and cluster launch control (Blackwell work stealing)."""
from .defs import cluster, out, pred, reg, row, smem

for _reg, _name in (("%cluster_ctarank", "cluster_ctarank"), ("%cluster_nctarank", "cluster_nctarank"),
                    ("%cluster_ctaid.x", "cluster_ctaid_x"), ("%cluster_ctaid.y", "cluster_ctaid_y"),
                    ("%cluster_ctaid.z", "cluster_ctaid_z"), ("%clusterid.x", "clusterid_x"),
                    ("%clusterid.y", "clusterid_y"), ("%clusterid.z", "clusterid_z"),
                    ("%cluster_nctaid.x", "cluster_nctaid_x"), ("%cluster_nctaid.y", "cluster_nctaid_y"),
                    ("%cluster_nctaid.z", "cluster_nctaid_z")):
    row(_name, "mov.u32 {r}, " + _reg + ";", [out("r")], ret="r", lowest="sm_90", memory=False,
        ptx=_reg)

row("mapa_shared", "mapa.shared::cluster.u32 {r}, {addr}, {cta};", [out("r"), smem("addr"), reg("cta")],
    ret="r", lowest="sm_90", memory=False,
    doc="The shared::cluster address of the same variable in CTA `cta` of the cluster.")
row("ld_shared_cluster_u32", "ld.shared::cluster.u32 {r}, [{addr}];", [out("r"), cluster("addr")], ret="r",
    lowest="sm_90")
row("st_shared_cluster_u32", "st.shared::cluster.u32 [{addr}], {v};", [cluster("addr"), reg("v")], lowest="sm_90")
row("ld_shared_cluster_f32", "ld.shared::cluster.f32 {r}, [{addr}];", [out("r", "float32"), cluster("addr")],
    ret="r", lowest="sm_90")
row("st_shared_cluster_f32", "st.shared::cluster.f32 [{addr}], {v};", [cluster("addr"), reg("v", "float32")],
    lowest="sm_90")

row("griddepcontrol_wait", "griddepcontrol.wait;", lowest="sm_90")
row("griddepcontrol_launch_dependents", "griddepcontrol.launch_dependents;", lowest="sm_90")

row("clusterlaunchcontrol_try_cancel",
    "clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128 [{result}], [{bar}];",
    [smem("result"), smem("bar")], lowest="sm_100a",
    doc="Ask to cancel a not-yet-launched cluster; the 16-byte response lands at result, completing on bar.")
row("clusterlaunchcontrol_try_cancel_multicast",
    "clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.multicast::cluster::all.b128 "
    "[{result}], [{bar}];", [smem("result"), smem("bar")], lowest="sm_100a")
row("clusterlaunchcontrol_query_is_canceled",
    """{
    .reg .b128 H_resp;
    ld.shared.b128 H_resp, [{result}];
    clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 {ok}, H_resp;
    }""", [pred("ok", "w"), smem("result")], ret="ok", lowest="sm_100a",
    ptx="clusterlaunchcontrol.query_cancel.is_canceled")
for _ax in "xyz":
    row(f"clusterlaunchcontrol_query_first_ctaid_{_ax}",
        """{
        .reg .b128 H_resp;
        ld.shared.b128 H_resp, [{result}];
        clusterlaunchcontrol.query_cancel.get_first_ctaid::""" + _ax + """.b32.b128 {r}, H_resp;
        }""", [out("r"), smem("result")], ret="r", lowest="sm_100a",
        ptx=f"clusterlaunchcontrol.query_cancel.get_first_ctaid::{_ax}")
