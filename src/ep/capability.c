/*
 * GetCapability: snapshot ORT's graph, ask the registry about every node, group the claimed
 * nodes with the partitioner and hand each group to ORT to fuse, with constant initializers
 * dropped from the fused node's inputs (Compile copies them into the plan). Claimed nodes whose
 * sequence or optional values would cross a group's boundary are unclaimed (ep/containers.c)
 * and the partition redone until stable. The partition report is logged (ORT's logger; stderr
 * with verbose on) and written (report_file) here.
 */
#include "ep/containers.h"
#include "ep/ep_types.h"
#include "ep/report.h"
#include "ir/partition.h"
#include "ops/registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static OrtStatus *add_groups(mlx_ep *ep, const ir_graph *g, const int *group_of, int groups,
                             int *sizes, OrtEpGraphSupportInfo *info) {
  const OrtEpApi *api = ep->factory->ep_api;
  const OrtNode **members = malloc(sizeof(OrtNode *) * ((size_t)g->n_nodes + 1));
  if (!members) return ep_status(ep->ort, ORT_FAIL, "%s: out of memory", EP_NAME);
  OrtNodeFusionOptions fusion = {.ort_version_supported = EP_ORT_API_VERSION,
                                 .drop_constant_initializers = true};
  OrtStatus *st = NULL;
  for (int grp = 0; grp < groups && !st; grp++) {
    size_t count = 0;
    for (int i = 0; i < g->n_nodes; i++)
      if (group_of[i] == grp) members[count++] = g->nodes[i].ort_node;
    sizes[grp] = (int)count;
    st = api->EpGraphSupportInfo_AddNodesToFuse(info, members, count, &fusion);
  }
  free(members);
  return st;
}

typedef struct decline_ctx {
  const ir_graph *g;
  report *r;
} decline_ctx;

/* Records a node the boundary rule for sequences unclaimed after the registry claimed it. */
static void boundary_decline(void *user, int node, const char *reason) {
  decline_ctx *c = user;
  const ir_node *nd = &c->g->nodes[node];
  report_decline *d = &c->r->declines[c->r->n_declines++];
  d->op = nd->op_type;
  d->domain = nd->domain;
  d->name = nd->name;
  d->since_version = nd->since_version;
  snprintf(d->reason, sizeof d->reason, "%s", reason);
  c->r->claimed--;
}

OrtStatus *ORT_API_CALL ep_get_capability(OrtEp *this_ptr, const OrtGraph *graph,
                                          OrtEpGraphSupportInfo *info) {
  mlx_ep *ep = (mlx_ep *)this_ptr;
  char err[512];
  ir_graph *g = ir_snapshot(ep->ort, ep->factory->ort_version, graph, err, sizeof err);
  if (!g) return ep_status(ep->ort, ORT_FAIL, "%s: GetCapability: %s", EP_NAME, err);
  int n = g->n_nodes;
  bool *claimed = calloc((size_t)n + 1, sizeof(bool));
  bool *alone = calloc((size_t)n + 1, sizeof(bool)); /* host-shaped: a group of its own */
  int *group_of = calloc((size_t)n + 1, sizeof(int));
  report r = {.nodes = n};
  r.declines = calloc((size_t)n + 1, sizeof(report_decline));
  r.group_sizes = calloc((size_t)n + 1, sizeof(int));
  OrtStatus *st = NULL;
  ir_graph *owner = NULL; /* in a subgraph: the control-flow node owning it */
  if (!claimed || !alone || !group_of || !r.declines || !r.group_sizes) {
    st = ep_status(ep->ort, ORT_FAIL, "%s: out of memory", EP_NAME);
    goto done;
  }
  /* Subgraphs. ORT partitions bottom up: a control-flow node's subgraphs come to GetCapability
   * before the graph holding the node. A node we claim inside a subgraph becomes a fused node
   * there, which no registry row can run, so its owner could then never be claimed whole. So:
   * when the owning If/Loop/Scan will be claimed whole (asked here of a snapshot of that node),
   * nothing inside is claimed on its own; when it will not, nodes in If branches are still
   * claimed one group at a time, while Loop and Scan bodies are not (they would run once per
   * iteration under ORT, paying MLX's per-evaluation cost each time, and bodies of function ops
   * such as SequenceMap are inlined into Loops after we saw them, where ORT rejects a fused
   * node). */
  op_claim_env env = {.float64 = ep->options.device == MX_DEVICE_CPU};
  char owner_why[256] = "";
  const char *owner_name = "";
  bool owner_whole = false, in_loop_body = false;
  if (g->parent_op[0]) {
    const OrtNode *parent = NULL;
    OrtStatus *pst = ep->ort->Graph_GetParentNode(graph, &parent);
    if (pst) ep->ort->ReleaseStatus(pst);
    owner = parent ? ir_snapshot_node(ep->ort, ep->factory->ort_version, parent, err, sizeof err)
                   : NULL;
    if (owner) {
      owner_name = owner->nodes[0].name;
      owner_whole = op_claim(owner, &owner->nodes[0], &env, owner_why, sizeof owner_why) != NULL;
    } else {
      snprintf(owner_why, sizeof owner_why, "the owning node could not be inspected");
    }
    in_loop_body = strcmp(g->parent_op, "If") != 0;
  }
  for (int i = 0; i < n; i++) {
    const ir_node *nd = &g->nodes[i];
    report_decline *d = &r.declines[r.n_declines];
    if (nd->assigned_ep[0]) { /* fused or placed in an earlier pass: not ours to judge again */
      r.nodes--;
      continue;
    }
    if (owner_whole)
      snprintf(d->reason, sizeof d->reason, "runs inside %s '%.80s', which MLX claims whole",
               g->parent_op, owner_name);
    else if (in_loop_body)
      snprintf(d->reason, sizeof d->reason, "inside a %s body, which is claimed only whole: "
               "%.180s", g->parent_op, owner_why);
    else {
      const op_row *row = op_claim(g, nd, &env, d->reason, sizeof d->reason);
      claimed[i] = row != NULL;
      alone[i] = row && op_node_compile_class(row, g, nd) == OP_HOST_SHAPE;
    }
    if (claimed[i]) {
      r.claimed++;
      continue;
    }
    d->op = nd->op_type;
    d->domain = nd->domain;
    d->name = nd->name;
    d->since_version = nd->since_version;
    r.n_declines++;
  }
  /* Sequences and optionals must stay inside one group: unclaim what would cross, regroup. */
  decline_ctx dc = {.g = g, .r = &r};
  int dropped = 0;
  do {
    r.groups = partition_groups(g, claimed, alone, group_of, NULL);
    if (r.groups >= 0) dropped = containers_enforce(g, claimed, group_of, boundary_decline, &dc);
  } while (r.groups >= 0 && dropped > 0);
  if (dropped < 0) {
    st = ep_status(ep->ort, ORT_FAIL, "%s: out of memory", EP_NAME);
    goto done;
  }
  if (r.groups < 0) {
    st = ep_status(ep->ort, ORT_FAIL, "%s: GetCapability: cannot order the graph", EP_NAME);
    goto done;
  }
  st = add_groups(ep, g, group_of, r.groups, r.group_sizes, info);
  if (ep->options.verbose) report_print(&r, stderr);
  report_log(&r, ep);
  if (!st && ep->options.report_file[0] && report_write_json(&r, ep->options.report_file) != 0)
    st = ep_status(ep->ort, ORT_FAIL, "%s: cannot write the report to '%s'", EP_NAME,
                   ep->options.report_file);
done:
  free(claimed);
  free(alone);
  free(group_of);
  free(r.declines);
  free(r.group_sizes);
  ir_graph_free(owner);
  ir_graph_free(g);
  return st;
}
