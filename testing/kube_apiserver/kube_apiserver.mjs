// A test stand-in for kube-apiserver (none can be installed here): the paths gpud's node-condition
// sink calls and the ones `kubectl get node` / `kubectl describe node` read, over HTTPS with a
// bearer token. It keeps one Node and the Events posted, applies strategic-merge patches
// (status.conditions merged by type, as the API server's patchMergeKey says) and JSON merge
// patches, and checks every request body against the Kubernetes OpenAPI schema with
// kubernetes-models (the package tests/kubernetes/package-lock.json pins for the manifest test).
// A body that fails is answered 422 (as the API server would) and listed in /gpud-test/log.
//
// Usage: node kube_apiserver.mjs <dir> <node-name>   (env GPUD_K8S_NODE_MODULES: node_modules)
// Writes <dir>/kubeconfig (server, CA data, token) and prints {"port": N, "kubeconfig": PATH}.
//
// Test controls (no token needed, never called by gpud):
//   POST /gpud-test/fault {"status": 403} | {"mode": "hang"} | {"mode": "garbage"} | {}:
//        how the calls made by gpud (User-Agent "gpud") are answered from now on; {} clears it
//   GET  /gpud-test/log: {"requests": [...], "schemaErrors": [...]}
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:https";
import { createRequire } from "node:module";
import path from "node:path";
import { randomUUID } from "node:crypto";

const [dir, nodeName] = process.argv.slice(2);
const modules = process.env.GPUD_K8S_NODE_MODULES;
if (!dir || !nodeName || !modules) {
  console.error("usage: GPUD_K8S_NODE_MODULES=... node kube_apiserver.mjs <dir> <node-name>");
  process.exit(2);
}
const require = createRequire(path.join(modules, "index.js"));
const { Node } = require("kubernetes-models/v1/Node");
const { Event } = require("kubernetes-models/v1/Event");

// The fields NodeCondition and Event define (core/v1): kubernetes-models does not reject unknown
// fields, and the API server drops them (or refuses them under strict field validation).
const conditionFields = new Set([
  "type", "status", "reason", "message", "lastHeartbeatTime", "lastTransitionTime",
]);
const eventFields = new Set([
  "apiVersion", "kind", "metadata", "involvedObject", "reason", "message", "source",
  "firstTimestamp", "lastTimestamp", "count", "type", "eventTime", "series", "action", "related",
  "reportingComponent", "reportingInstance",
]);

const token = "gpud-test-" + randomUUID();
execFileSync("openssl", [
  "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
  "-keyout", path.join(dir, "apiserver.key"), "-out", path.join(dir, "apiserver.crt"),
  "-days", "2", "-subj", "/CN=kube-apiserver-test", "-addext", "subjectAltName=IP:127.0.0.1",
], { stdio: "ignore" });
const cert = readFileSync(path.join(dir, "apiserver.crt"));
const key = readFileSync(path.join(dir, "apiserver.key"));

let resourceVersion = 1;
const node = {
  apiVersion: "v1",
  kind: "Node",
  metadata: {
    name: nodeName,
    uid: randomUUID(),
    resourceVersion: String(resourceVersion),
    creationTimestamp: new Date().toISOString().replace(/\.\d+Z$/, "Z"),
    labels: { "kubernetes.io/hostname": nodeName },
  },
  spec: {},
  status: {
    conditions: [{
      type: "Ready", status: "True", reason: "KubeletReady", message: "kubelet is posting ready status",
      lastHeartbeatTime: "2026-01-01T00:00:00Z", lastTransitionTime: "2026-01-01T00:00:00Z",
    }],
    addresses: [{ type: "InternalIP", address: "10.0.0.7" }],
    nodeInfo: {
      machineID: "m", systemUUID: "s", bootID: "b", kernelVersion: "6.1.0", osImage: "Debian 12",
      containerRuntimeVersion: "containerd://1.7", kubeletVersion: "v1.32.0", kubeProxyVersion: "",
      operatingSystem: "linux", architecture: "amd64",
    },
  },
};
const events = [];  // every Event posted
const requests = [];
const schemaErrors = [];
let fault = {};

function status(res, code, reason, message) {
  send(res, code, { kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message, reason, code });
}
function send(res, code, body) {
  res.writeHead(code, { "Content-Type": "application/json" });
  res.end(JSON.stringify(body));
}
function invalid(res, what, message) {
  schemaErrors.push(`${what}: ${message}`);
  status(res, 422, "Invalid", `${what}: ${message}`);
}
function validate(Model, obj) {
  try {
    new Model(obj).validate();
    return null;
  } catch (e) {
    return e.message;
  }
}
function unknownFields(obj, allowed) {
  return Object.keys(obj).filter((k) => !allowed.has(k));
}

// JSON merge patch (RFC 7386); with `strategic`, lists of conditions merge by their "type".
function merge(target, patch, strategic, key) {
  if (Array.isArray(patch)) {
    if (strategic && key === "conditions" && Array.isArray(target)) {
      const out = target.map((c) => ({ ...c }));
      for (const c of patch) {
        const at = out.findIndex((have) => have.type === c.type);
        if (at >= 0) out[at] = merge(out[at], c, strategic, null);
        else out.push(c);
      }
      return out;
    }
    return patch;
  }
  if (patch === null || typeof patch !== "object") return patch;
  const out = target && typeof target === "object" && !Array.isArray(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = merge(out[k], v, strategic, k);
  }
  return out;
}

function patchNode(req, res, body) {
  const type = (req.headers["content-type"] || "").split(";")[0].trim();
  const strategic = type === "application/strategic-merge-patch+json";
  if (!strategic && type !== "application/merge-patch+json")
    return status(res, 415, "UnsupportedMediaType", `the patch type ${type} is not supported here`);
  let patch;
  try {
    patch = JSON.parse(body);
  } catch (e) {
    return invalid(res, "PATCH body", "not JSON: " + e.message);
  }
  if (!patch || typeof patch !== "object" || Array.isArray(patch))
    return invalid(res, "PATCH body", "not a JSON object");
  for (const c of patch.status?.conditions ?? []) {
    const extra = unknownFields(c, conditionFields);
    if (extra.length) return invalid(res, "PATCH status.conditions", `unknown fields ${extra}`);
    if (!["True", "False", "Unknown"].includes(c.status))
      return invalid(res, "PATCH status.conditions", `status "${c.status}" is not True, False or Unknown`);
  }
  const merged = merge(node, patch, strategic, null);
  const problem = validate(Node, merged);
  if (problem) return invalid(res, "patched Node", problem);
  if (merged.metadata?.name !== nodeName) return invalid(res, "patched Node", "metadata.name changed");
  Object.assign(node, merged);
  node.metadata.resourceVersion = String(++resourceVersion);
  send(res, 200, node);
}

function postEvent(req, res, body, namespace) {
  let event;
  try {
    event = JSON.parse(body);
  } catch (e) {
    return invalid(res, "Event", "not JSON: " + e.message);
  }
  const problem = validate(Event, event);
  if (problem) return invalid(res, "Event", problem);
  const extra = unknownFields(event, eventFields);
  if (extra.length) return invalid(res, "Event", `unknown fields ${extra}`);
  if (event.kind !== "Event" || event.apiVersion !== "v1") return invalid(res, "Event", "not a v1 Event");
  const meta = event.metadata ?? {};
  if (!meta.name && !meta.generateName) return invalid(res, "Event", "metadata.name or generateName is required");
  if (meta.name && !/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(meta.name))
    return invalid(res, "Event", `metadata.name "${meta.name}" is not a DNS subdomain`);
  if (meta.namespace && meta.namespace !== namespace)
    return invalid(res, "Event", "metadata.namespace does not match the request's namespace");
  if (meta.name && events.some((e) => e.metadata.namespace === namespace && e.metadata.name === meta.name))
    return status(res, 409, "AlreadyExists", `events "${meta.name}" already exists`);
  const stored = {
    ...event,
    metadata: {
      ...meta,
      name: meta.name ?? meta.generateName + randomUUID().slice(0, 5),
      namespace,
      uid: randomUUID(),
      resourceVersion: String(++resourceVersion),
      creationTimestamp: new Date().toISOString().replace(/\.\d+Z$/, "Z"),
    },
  };
  events.push(stored);
  send(res, 201, stored);
}

// fieldSelector "a.b=c,d=e" applied to an object (what kubectl describe asks for).
function selects(obj, selector) {
  if (!selector) return true;
  return selector.split(",").every((term) => {
    const [field, value] = term.split("=");
    const got = field.split(".").reduce((o, k) => (o == null ? undefined : o[k]), obj);
    return String(got ?? "") === value;
  });
}

const resources = [
  { name: "nodes", singularName: "node", namespaced: false, kind: "Node", verbs: ["get", "list", "patch"], shortNames: ["no"] },
  { name: "nodes/status", singularName: "", namespaced: false, kind: "Node", verbs: ["get", "patch"] },
  { name: "events", singularName: "event", namespaced: true, kind: "Event", verbs: ["create", "get", "list"], shortNames: ["ev"] },
  { name: "pods", singularName: "pod", namespaced: true, kind: "Pod", verbs: ["get", "list"], shortNames: ["po"] },
  { name: "namespaces", singularName: "namespace", namespaced: false, kind: "Namespace", verbs: ["get", "list"], shortNames: ["ns"] },
];

function route(req, res, body) {
  const url = new URL(req.url, "https://127.0.0.1");
  const p = url.pathname.replace(/\/+$/, "");
  const m = req.method;
  if (p === "/gpud-test/fault" && m === "POST") {
    fault = JSON.parse(body || "{}");
    return send(res, 200, fault);
  }
  if (p === "/gpud-test/log") return send(res, 200, { requests, schemaErrors, events, node });
  if (req.headers.authorization !== `Bearer ${token}`)
    return status(res, 401, "Unauthorized", "Unauthorized");
  if ((req.headers["user-agent"] || "") === "gpud") {
    if (fault.mode === "hang") return;  // never answered; the client gives up
    if (fault.mode === "garbage") {
      res.writeHead(200, { "Content-Type": "text/html" });
      return res.end("<html><body>502 Bad Gateway</body></html>");
    }
    if (fault.status) return status(res, fault.status, "Injected", `injected ${fault.status} by the test`);
  }
  const nodePath = `/api/v1/nodes/${nodeName}`;
  if (m === "GET" && p === "/version")
    return send(res, 200, { major: "1", minor: "32", gitVersion: "v1.32.0-gpud-test", platform: "linux/amd64" });
  if (m === "GET" && p === "/api") return send(res, 200, { kind: "APIVersions", versions: ["v1"], serverAddressByClientCIDRs: [] });
  if (m === "GET" && p === "/apis") return send(res, 200, { kind: "APIGroupList", apiVersion: "v1", groups: [] });
  if (m === "GET" && p === "/api/v1") return send(res, 200, { kind: "APIResourceList", groupVersion: "v1", resources });
  if (m === "GET" && (p === nodePath || p === nodePath + "/status")) return send(res, 200, node);
  if (m === "GET" && p === "/api/v1/nodes")
    return send(res, 200, { kind: "NodeList", apiVersion: "v1", metadata: { resourceVersion: String(resourceVersion) }, items: [node] });
  if (m === "PATCH" && (p === nodePath || p === nodePath + "/status")) return patchNode(req, res, body);
  if (p.startsWith("/api/v1/nodes/")) return status(res, 404, "NotFound", `nodes "${p.split("/")[4]}" not found`);
  const ev = p.match(/^\/api\/v1(?:\/namespaces\/([^/]+))?\/events$/);
  if (ev && m === "POST" && ev[1]) return postEvent(req, res, body, ev[1]);
  if (ev && m === "GET") {
    const items = events.filter((e) => (!ev[1] || e.metadata.namespace === ev[1]) && selects(e, url.searchParams.get("fieldSelector")));
    return send(res, 200, { kind: "EventList", apiVersion: "v1", metadata: { resourceVersion: String(resourceVersion) }, items });
  }
  if (m === "GET" && /^\/api\/v1(\/namespaces\/[^/]+)?\/pods$/.test(p))
    return send(res, 200, { kind: "PodList", apiVersion: "v1", metadata: { resourceVersion: String(resourceVersion) }, items: [] });
  return status(res, 404, "NotFound", `the server could not find the requested resource (${m} ${p})`);
}

const server = createServer({ cert, key }, (req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const body = Buffer.concat(chunks).toString("utf8");
    const entry = {
      method: req.method, path: req.url, contentType: req.headers["content-type"] ?? "",
      userAgent: req.headers["user-agent"] ?? "",
    };
    requests.push(entry);
    res.on("finish", () => { entry.status = res.statusCode; });
    try {
      route(req, res, body);
    } catch (e) {
      status(res, 500, "InternalError", String(e));
    }
  });
});
server.listen(0, "127.0.0.1", () => {
  const port = server.address().port;
  const kubeconfig = path.join(dir, "kubeconfig");
  writeFileSync(kubeconfig, [
    "apiVersion: v1",
    "kind: Config",
    "current-context: test",
    "contexts:",
    "- name: test",
    "  context: {cluster: test, user: gpud}",
    "clusters:",
    "- name: test",
    "  cluster:",
    `    server: https://127.0.0.1:${port}`,
    `    certificate-authority-data: ${cert.toString("base64")}`,
    "users:",
    "- name: gpud",
    "  user:",
    `    token: ${token}`,
    "",
  ].join("\n"), { mode: 0o600 });
  console.log(JSON.stringify({ port, kubeconfig }));
});
for (const sig of ["SIGTERM", "SIGINT"]) process.on(sig, () => process.exit(0));
