// CTest kubernetes_manifests: renders deploy/kubernetes and deploy/kubernetes/prometheus-operator
// with `kubectl kustomize`, validates every object against the Kubernetes (and prometheus-operator)
// OpenAPI schemas with kubernetes-models (pinned by tests/kubernetes/package-lock.json), and checks
// what the schemas cannot: that the DaemonSet runs gpud as tests/container/image_test.sh does, that
// the Service and PodMonitor find its pods and port, that the scrape job is the "gpud" the rules
// expect, and that the PrometheusRules hold exactly deploy/prometheus's rule files.
//
// kubernetes-models checks types, required fields and formats; it does not reject unknown fields,
// which is why the fields gpud depends on are checked one by one below.
// Exits 77 (skipped) when kubectl is missing.
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import assert from "node:assert/strict";

const source = process.env.GPUD_SOURCE_DIR;
const modules = process.env.GPUD_K8S_NODE_MODULES;
if (!source || !modules) {
  console.error("GPUD_SOURCE_DIR and GPUD_K8S_NODE_MODULES must be set (CTest sets them)");
  process.exit(2);
}
const require = createRequire(path.join(modules, "index.js"));
const YAML = require("yaml");

function findKubectl() {
  if (process.env.KUBECTL) return process.env.KUBECTL;
  for (const dir of (process.env.PATH || "").split(":")) {
    const candidate = path.join(dir, "kubectl");
    if (dir && existsSync(candidate)) return candidate;
  }
  return null;
}
const kubectl = findKubectl();
if (!kubectl) {
  console.log("SKIP: kubectl not found (scripts/install-deps.sh installs Debian's kubernetes-client)");
  process.exit(77);
}
console.log(execFileSync(kubectl, ["version", "--client"], { encoding: "utf8" }).split("\n")[0]);

// Every kind the manifests may contain, and its model.
const models = {
  "v1/Namespace": () => require("kubernetes-models/v1/Namespace").Namespace,
  "v1/ServiceAccount": () => require("kubernetes-models/v1/ServiceAccount").ServiceAccount,
  "v1/Service": () => require("kubernetes-models/v1/Service").Service,
  "apps/v1/DaemonSet": () => require("kubernetes-models/apps/v1/DaemonSet").DaemonSet,
  "rbac.authorization.k8s.io/v1/ClusterRole": () =>
    require("kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRole").ClusterRole,
  "rbac.authorization.k8s.io/v1/ClusterRoleBinding": () =>
    require("kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRoleBinding").ClusterRoleBinding,
  "monitoring.coreos.com/v1/PodMonitor": () =>
    require("@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PodMonitor").PodMonitor,
  "monitoring.coreos.com/v1/PrometheusRule": () =>
    require("@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule")
      .PrometheusRule,
};

function render(dir) {
  const text = execFileSync(kubectl, ["kustomize", path.join(source, dir)], { encoding: "utf8" });
  const objects = [];
  for (const doc of YAML.parseAllDocuments(text)) {
    if (doc.errors.length) throw new Error(`${dir}: ${doc.errors.map(String).join("; ")}`);
    const obj = doc.toJS();
    if (obj) objects.push(obj);
  }
  for (const obj of objects) {
    const key = `${obj.apiVersion}/${obj.kind}`;
    const model = models[key];
    assert.ok(model, `${dir}: ${key} ${obj.metadata?.name} has no schema here`);
    const Model = model();
    try {
      new Model(obj).validate();
    } catch (e) {
      throw new Error(`${dir}: ${key} ${obj.metadata?.name} fails its schema: ${e.message}`);
    }
    console.log(`valid: ${dir}: ${key} ${obj.metadata.namespace ?? "-"}/${obj.metadata.name}`);
  }
  return objects;
}

const base = render("deploy/kubernetes");
const operator = render("deploy/kubernetes/prometheus-operator");
const gpuOperator = render("deploy/kubernetes-overlays/gpu-operator");
const find = (objects, kind, name) => {
  const found = objects.filter((o) => o.kind === kind && o.metadata.name === name);
  assert.equal(found.length, 1, `one ${kind} ${name}`);
  return found[0];
};
assert.deepEqual(
  base.map((o) => `${o.kind}/${o.metadata.name}`).sort(),
  [
    "ClusterRole/gpud-node-conditions",
    "ClusterRoleBinding/gpud-node-conditions",
    "DaemonSet/gpud",
    "Namespace/gpud",
    "Service/gpud",
    "ServiceAccount/gpud",
  ],
);
assert.deepEqual(
  operator.map((o) => `${o.kind}/${o.metadata.name}`).sort(),
  ["PodMonitor/gpud", "PrometheusRule/dcgm-compat", "PrometheusRule/gpud-alerts", "PrometheusRule/gpud-fleet"],
);
const clusterScoped = new Set(["Namespace", "ClusterRole", "ClusterRoleBinding"]);
for (const o of [...base, ...operator].filter((o) => !clusterScoped.has(o.kind)))
  assert.equal(o.metadata.namespace, "gpud", `${o.kind} ${o.metadata.name} in namespace gpud`);
assert.equal(
  find(base, "Namespace", "gpud").metadata.labels["pod-security.kubernetes.io/enforce"],
  "privileged",
  "Pod Security admission must let the privileged pod in",
);

// The DaemonSet: the settings tests/container/image_test.sh runs the image with.
const version = /project\(gpud VERSION ([0-9.]+)/.exec(
  readFileSync(path.join(source, "CMakeLists.txt"), "utf8"),
)[1];
const ds = find(base, "DaemonSet", "gpud");
const pod = ds.spec.template.spec;
const podLabels = ds.spec.template.metadata.labels;
const selects = (selector) =>
  Object.entries(selector).every(([k, v]) => podLabels[k] === v) &&
  Object.keys(selector).length > 0;
assert.ok(selects(ds.spec.selector.matchLabels), "the DaemonSet selects its own pods");
assert.equal(ds.spec.updateStrategy.type, "RollingUpdate");
assert.equal(pod.hostPID, true, "host PID");
assert.equal(pod.hostNetwork, true, "host network (and with it the node's hostname)");
assert.equal(pod.serviceAccountName, "gpud");
find(base, "ServiceAccount", "gpud");
assert.equal(pod.nodeSelector["nvidia.com/gpu.present"], "true", "GPU nodes only");
assert.ok(
  pod.tolerations.some((t) => t.operator === "Exists" && !t.key),
  "tolerates every taint",
);
assert.equal(pod.containers.length, 1);
const c = pod.containers[0];
assert.equal(c.image, `gpud:${version}`, "the image `make image` builds (CMakeLists.txt's version)");
assert.equal(c.securityContext.privileged, true, "privileged");
assert.equal(c.args[0], "run");
const flag = (name) => {
  const arg = c.args.find((a) => a.startsWith(`--${name}=`));
  assert.ok(arg, `--${name}=`);
  return arg.slice(name.length + 3);
};
const volumes = Object.fromEntries(pod.volumes.map((v) => [v.name, v]));
const mountAt = (mountPath) => {
  const m = c.volumeMounts.find((x) => x.mountPath === mountPath);
  assert.ok(m, `a volume mounted at ${mountPath}`);
  return { mount: m, volume: volumes[m.name] };
};
const hostRoot = mountAt(flag("host-root"));
assert.equal(hostRoot.volume.hostPath.path, "/", "--host-root is the node's /");
assert.equal(hostRoot.mount.readOnly, true, "the node's / read-only");
const state = mountAt(flag("data-dir"));
assert.equal(state.volume.hostPath.path, "/var/lib/gpud", "the state directory on the node");
assert.ok(!state.mount.readOnly);
const kmsg = mountAt("/dev/kmsg");
assert.equal(kmsg.volume.hostPath.path, "/dev/kmsg");
assert.equal(kmsg.volume.hostPath.type, "CharDevice");
// What is served to whom: with hostNetwork every listener is on the node's addresses, which other
// tenants' pods reach. The API (processes, pods, machine ids) listens on the node's loopback only;
// only the metrics listener, which serves GET /metrics alone, listens on the node's address.
const [listenHost, listenPortText] = flag("listen-address").split(/:(?=[0-9]+$)/);
assert.equal(listenHost, "127.0.0.1", "the API listens on the node's loopback only");
const listenPort = Number(listenPortText);
assert.ok(!c.args.some((a) => a.startsWith("--api-socket")), "the Unix socket (the default) stays");
const ports = Object.fromEntries(c.ports.map((p) => [p.name, p.containerPort]));
assert.deepEqual(Object.keys(ports), ["metrics"], "only the metrics port is declared");
const metricsPort = Number(flag("metrics-listen-address").split(":").pop());
assert.equal(ports.metrics, metricsPort, "the metrics port is gpud's metrics listener");
// The kubelet probes from the node, whose loopback (hostNetwork) is gpud's.
for (const probe of [c.readinessProbe, c.livenessProbe]) {
  assert.equal(probe.httpGet.path, "/healthz");
  assert.equal(probe.httpGet.scheme, "HTTPS");
  assert.equal(probe.httpGet.host, "127.0.0.1", "the probe goes where the API listens");
  assert.equal(probe.httpGet.port, listenPort);
}
assert.ok(c.resources.requests.cpu && c.resources.requests.memory, "resource requests");
assert.ok(c.resources.limits.memory, "a memory limit");
assert.equal(pod.priorityClassName, "system-node-critical", "evicted last under node pressure");
const env = Object.fromEntries(c.env.map((e) => [e.name, e.value]));
assert.equal(env.NVIDIA_VISIBLE_DEVICES, "all", "the NVIDIA runtime gives gpud NVML and every GPU");

// Node conditions: the flag, the node's name from the downward API, a token, and a role that may
// patch the Node's status and write Events, bound to the pod's account.
assert.ok(c.args.includes("--kubernetes-node-conditions"), "--kubernetes-node-conditions");
assert.equal(
  c.env.find((e) => e.name === "NODE_NAME")?.valueFrom?.fieldRef?.fieldPath,
  "spec.nodeName",
  "NODE_NAME from the downward API",
);
assert.notEqual(pod.automountServiceAccountToken, false, "the service account's token is mounted");
assert.notEqual(find(base, "ServiceAccount", "gpud").automountServiceAccountToken, false);
const role = find(base, "ClusterRole", "gpud-node-conditions");
const allows = (resource, verb) =>
  role.rules.some(
    (r) => r.apiGroups.includes("") && r.resources.includes(resource) && r.verbs.includes(verb),
  );
for (const [resource, verb] of [
  ["nodes", "get"],
  ["nodes/status", "patch"],
  ["events", "create"],
])
  assert.ok(allows(resource, verb), `the role allows ${verb} ${resource}`);
assert.ok(!allows("nodes", "patch") && !allows("nodes", "update"), "no cordon or taint");
const binding = find(base, "ClusterRoleBinding", "gpud-node-conditions");
assert.equal(binding.roleRef.name, role.metadata.name);
assert.deepEqual(binding.subjects, [{ kind: "ServiceAccount", name: "gpud", namespace: "gpud" }]);
// The GPU Operator overlay: the base's objects, the DaemonSet's pods in the operator's `nvidia`
// RuntimeClass and otherwise unchanged.
assert.deepEqual(
  gpuOperator.map((o) => `${o.kind}/${o.metadata.name}`).sort(),
  base.map((o) => `${o.kind}/${o.metadata.name}`).sort(),
);
const operatorDs = find(gpuOperator, "DaemonSet", "gpud");
assert.equal(operatorDs.spec.template.spec.runtimeClassName, "nvidia", "the GPU Operator's runtime");
delete operatorDs.spec.template.spec.runtimeClassName;
assert.deepEqual(operatorDs, ds, "the overlay changes nothing else");

// The headless Service and the PodMonitor find the pods and their port.
const svc = find(base, "Service", "gpud");
assert.equal(svc.spec.clusterIP, "None", "headless");
assert.ok(selects(svc.spec.selector));
assert.ok(svc.spec.ports.every((p) => p.targetPort in ports));
const pm = find(operator, "PodMonitor", "gpud");
assert.ok(selects(pm.spec.selector.matchLabels));
assert.equal(podLabels[pm.spec.jobLabel], "gpud", 'the scrape job is "gpud", as the rules expect');
const endpoint = pm.spec.podMetricsEndpoints[0];
assert.equal(ports[endpoint.port], metricsPort, "Prometheus scrapes the metrics listener");
assert.equal(endpoint.scheme, "http");
assert.equal(endpoint.path, "/metrics");
assert.ok(
  endpoint.relabelings.some(
    (r) =>
      r.targetLabel === "node" && r.sourceLabels.includes("__meta_kubernetes_pod_node_name"),
  ),
  "the node label Alertmanager groups by",
);

// The PrometheusRules are deploy/prometheus's rule files.
for (const [name, file] of [
  ["gpud-alerts", "gpud-alerts.yml"],
  ["dcgm-compat", "dcgm-compat-rules.yml"],
  ["gpud-fleet", "gpud-fleet-rules.yml"],
]) {
  const rules = YAML.parse(readFileSync(path.join(source, "deploy/prometheus", file), "utf8"));
  assert.deepEqual(
    find(operator, "PrometheusRule", name).spec,
    rules,
    `PrometheusRule ${name} differs from deploy/prometheus/${file}: run scripts/gen-prometheusrules.sh`,
  );
}
console.log("PASS: deploy/kubernetes renders, validates and runs gpud as the image test does");
