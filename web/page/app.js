// Aperture's page: the HTTP API of the aggregator or of a node's daemon that serves it (the
// tree, GET /compare), nothing else.
// Every choice lives in the URL's hash, so a link shows the same view. The flame graph
// follows views/flame.js's logic: frames in preorder, a click zooms to a frame (its
// ancestors kept, dimmed, full width), a search counts a match once however deep it nests.
"use strict";
(function () {
	var $ = function (id) { return document.getElementById(id); };
	var TYPES = ["cpu", "offcpu", "locks", "alloc", "alloc_objects", "monitors"];
	var RANGES = [["300", "last 5 min"], ["900", "last 15 min"], ["3600", "last hour"],
		      ["21600", "last 6 hours"], ["86400", "last day"], ["604800", "last 7 days"],
		      ["custom", "from .. until"]];
	var FRAME_H = 18, LIST_TARGETS_UP_TO = 20, TOP_ROWS = 60;
	var main = $("main");
	var shown = null;   // what the flame graph draws: {root, total, unit, diff}
	var generation = 0; // a newer render makes an older one's answers moot
	var navGeneration = 0;
	var scopes = [];    // every target and service listed, for compare's "against"

	function hashState() {
		var p = new URLSearchParams(location.hash.slice(1)), s = {};
		p.forEach(function (v, k) { s[k] = v; });
		return s;
	}

	function setHash(patch) {
		var s = Object.assign(hashState(), patch), p = new URLSearchParams();
		Object.keys(s).sort().forEach(function (k) {
			if (s[k] !== "" && s[k] != null)
				p.set(k, s[k]);
		});
		var h = "#" + p.toString();
		if (h !== location.hash)
			location.hash = h;
	}

	function token() { return localStorage.getItem("aperture-token") || ""; }

	function HttpError(status, message) {
		this.status = status;
		this.message = message;
	}
	HttpError.prototype = Object.create(Error.prototype);

	function get(path, params) {
		var h = token() ? { Authorization: "Bearer " + token() } : {};
		var url = path + (params && params.toString() ? "?" + params : "");
		return fetch(url, { headers: h, cache: "no-store" }).then(function (r) {
			if (r.ok)
				return r;
			return r.text().then(function (t) {
				var why = t;
				try { why = JSON.parse(t).error || t; } catch (e) { /* not JSON */ }
				throw new HttpError(r.status, path + ": " + r.status + " " + why);
			});
		});
	}
	function getText(path, params) { return get(path, params).then(function (r) { return r.text(); }); }
	function list(path) {
		return get(path + "/").then(function (r) { return r.json(); })
			.then(function (d) { return d.entries.map(function (e) { return e.name; }); });
	}
	function keyValues(text) {
		var o = {};
		text.split("\n").forEach(function (l) {
			var i = l.indexOf(": ");
			if (i > 0)
				o[l.slice(0, i)] = l.slice(i + 2);
		});
		return o;
	}

	function isAuthError(e) { return e && (e.status === 401 || e.status === 403); }

	// ---- states: loading, empty, error, partial, unauthorized -------------------------
	function setState(state, message) {
		main.dataset.state = state;
		$("message").textContent = message || "";
	}

	function banner(kind, text) {
		$("banner").className = kind || "";
		$("banner").textContent = text || "";
	}

	// Unauthorized: nothing of what was shown stays on the page.
	function unauthorized(e) {
		generation++;
		navGeneration++;
		$("services").textContent = "";
		$("nodes").textContent = "";
		clearView();
		$("toolbar").hidden = true;
		$("title").textContent = "";
		$("hint").hidden = true;
		banner("unauthorized", "Unauthorized");
		setState("unauthorized", (token() ? "This token may not read this (" +
			e.message + "). " : "No token: ") + "enter a valid token above.");
	}

	function clearView() {
		shown = null;
		$("flame").textContent = "";
		$("flame").style.height = "0";
		document.querySelector("#top tbody").textContent = "";
		$("matched").textContent = "";
		$("details").innerHTML = "&nbsp;";
		["deadlocks", "busy", "blocked"].forEach(function (id) { $(id).textContent = ""; });
	}

	// ---- the side bar: services, nodes and their targets ------------------------------
	function ago(iso) {
		if (!iso || iso === "never")
			return "never";
		var s = Math.round((Date.now() - Date.parse(iso)) / 1000);
		return s < 120 ? s + " s ago" : s < 7200 ? Math.round(s / 60) + " min ago" :
			Math.round(s / 3600) + " h ago";
	}

	function link(text, path) {
		var a = document.createElement("a");
		a.textContent = text;
		a.dataset.path = path;
		a.href = "#" + new URLSearchParams(Object.assign(hashState(), { p: path, z: "" }));
		a.onclick = function (ev) {
			ev.preventDefault();
			setHash({ p: path, z: "", view: hashState().view === "threads" &&
				  !/\/targets\//.test(path) ? "flame" : hashState().view });
		};
		return a;
	}

	// A target's line: pid, comm, state, runtime, its collectors and why any failed.
	function targetItem(node, pid) {
		var li = document.createElement("li"), path = "/nodes/" + encodeURIComponent(node) +
			"/targets/" + pid;
		li.className = "target";
		li.appendChild(link("pid " + pid, path));
		var meta = document.createElement("span");
		meta.className = "meta";
		li.appendChild(meta);
		scopes.push({ path: path, label: node + " pid " + pid });
		return getText(path + "/status").then(function (t) {
			var st = keyValues(t), colls = [], whys = [];
			Object.keys(st).forEach(function (k) {
				var v = st[k];
				if (/^(cpu|offcpu|syscalls|kernel_locks|jvm|collectors?|collector_.*)$/.test(k))
					colls.push(k + " " + v.split(":")[0]);
				if (/unavailable|fail|error|denied/i.test(v) && k !== "last_error")
					whys.push(k + ": " + v);
			});
			if (st.last_error && st.last_error !== "none")
				whys.push(st.last_error);
			li.querySelector("a").textContent = "pid " + pid + " " + (st.comm || "");
			meta.textContent = " " + (st.state || "?") + ", " + (st.runtime || "?") +
				(colls.length ? " [" + colls.join(", ") + "]" : "");
			li.title = t;
			whys.forEach(function (w) {
				var s = document.createElement("span");
				s.className = "why";
				s.textContent = w;
				li.appendChild(s);
			});
			return li;
		});
	}

	function nodeItem(name, expand, problems) {
		var li = document.createElement("li"), head = document.createElement("div");
		var path = "/nodes/" + encodeURIComponent(name), meta = document.createElement("span");
		var ul = document.createElement("ul"), more = document.createElement("a");
		head.className = "node-head";
		head.appendChild(document.createTextNode(name));
		meta.className = "meta";
		head.appendChild(meta);
		li.appendChild(head);
		ul.className = "targets";
		li.appendChild(ul);
		var loadTargets = function () {
			more.remove();
			return list(path + "/targets").then(function (pids) {
				if (!pids.length)
					ul.innerHTML = "<li class=meta>no targets</li>";
				return Promise.all(pids.map(function (pid) {
					return targetItem(name, pid).then(function (item) {
						ul.appendChild(item);
					}, function (e) {
						if (isAuthError(e))
							throw e;
						problems.push(e.message);
					});
				}));
			});
		};
		var status = getText(path + "/status").then(function (t) {
			var st = keyValues(t), lag = +st.lag_s;
			// A node's own daemon serves its status, not an aggregator's view of it.
			meta.textContent = st.uptime_s && !st.last_batch ? "this machine, up " +
				Math.round(st.uptime_s / 60) + " min" : "synced " + ago(st.last_batch) +
				(st.lag_s ? ", lag " + lag + " s" : "");
			if (lag > 300 || (st.last_error && st.last_error !== "none" && st.last_error))
				meta.classList.add("bad");
			li.title = t;
		});
		if (expand)
			return Promise.all([status, loadTargets()]).then(function () { return li; });
		more.textContent = "targets...";
		more.onclick = function () {
			loadTargets().catch(function (e) {
				if (isAuthError(e))
					unauthorized(e);
			});
		};
		li.appendChild(more);
		return status.then(function () { return li; });
	}

	function loadNav() {
		var problems = [], g = ++navGeneration;
		scopes = [];
		banner("", "");
		var services = list("/services").then(function (names) {
			var ul = $("services");
			ul.textContent = "";
			if (!names.length)
				ul.innerHTML = "<li class=meta>none yet</li>";
			names.forEach(function (n) {
				var li = document.createElement("li"), path = "/services/" +
					encodeURIComponent(n);
				li.appendChild(link(n, path));
				ul.appendChild(li);
				scopes.push({ path: path, label: "service " + n });
			});
		});
		var nodes = list("/nodes").then(function (names) {
			var expand = names.length <= LIST_TARGETS_UP_TO;
			return Promise.all(names.map(function (n) {
				return nodeItem(n, expand, problems).catch(function (e) {
					if (isAuthError(e) && e.status === 401)
						throw e;
					problems.push(e.message);
					return null;
				});
			})).then(function (items) {
				var ul = $("nodes");
				ul.textContent = "";
				if (!names.length)
					ul.innerHTML = "<li class=meta>none yet</li>";
				items.forEach(function (li) { if (li) ul.appendChild(li); });
			});
		});
		return Promise.all([services, nodes]).then(function () {
			if (g !== navGeneration)
				return;
			if (problems.length)
				banner("partial", "Partial: " + problems.length + " part(s) could not be " +
				       "read (" + problems[0] + ")");
			markCurrent();
			fillBase();
		}, function (e) {
			if (isAuthError(e))
				unauthorized(e);
			else
				banner("error", e.message);
		});
	}

	function markCurrent() {
		var p = hashState().p;
		document.querySelectorAll("nav a[data-path]").forEach(function (a) {
			a.classList.toggle("current", a.dataset.path === p);
		});
	}

	// ---- ranges -----------------------------------------------------------------------
	function localInput(unix) {
		var d = new Date(unix * 1000);
		return new Date(d.getTime() - d.getTimezoneOffset() * 60000).toISOString().slice(0, 19);
	}
	function fromInput(v) { return Math.floor(new Date(v).getTime() / 1000); }

	// The query of a range: ?last=N or ?from=&until=, prefixed for compare's base.
	function rangeParams(p, prefix, range, from, until) {
		if (range === "custom" && from && until) {
			p.set(prefix + "from", from);
			p.set(prefix + "until", until);
		} else {
			p.set(prefix + "last", range && range !== "custom" ? range : "3600");
		}
		return p;
	}

	function fillSelect(sel, options, value) {
		if (!sel.options.length)
			options.forEach(function (o) {
				var opt = document.createElement("option");
				opt.value = o[0];
				opt.textContent = o[1];
				sel.appendChild(opt);
			});
		sel.value = value;
	}

	function fillBase() {
		var s = hashState(), sel = $("base"), want = s.bp || s.p || "";
		sel.textContent = "";
		var same = document.createElement("option");
		same.value = "";
		same.textContent = "the same, over another range";
		sel.appendChild(same);
		scopes.forEach(function (sc) {
			if (sc.path === s.p)
				return;
			var o = document.createElement("option");
			o.value = sc.path;
			o.textContent = sc.label;
			sel.appendChild(o);
		});
		sel.value = want === s.p ? "" : want;
	}

	// ---- folded text into a tree --------------------------------------------------------
	// Lines `a;b;c N`, or compare's `a;b;c BASE NOW`. Nodes: {name, v, b (base), self,
	// kids: Map}.
	function parseFolded(text, diff) {
		var root = { name: "all", v: 0, b: 0, self: 0, bself: 0, kids: new Map(), depth: 0 };
		var lines = text.split("\n");
		for (var i = 0; i < lines.length; i++) {
			var l = lines[i];
			if (!l)
				continue;
			var sp = l.lastIndexOf(" "), now = +l.slice(sp + 1), base = 0, stack = l.slice(0, sp);
			if (diff) {
				var sp2 = stack.lastIndexOf(" ");
				base = +stack.slice(sp2 + 1);
				stack = stack.slice(0, sp2);
			}
			var node = root, names = stack.split(";");
			root.v += now;
			root.b += base;
			for (var j = 0; j < names.length; j++) {
				var k = node.kids.get(names[j]);
				if (!k) {
					k = { name: names[j], v: 0, b: 0, self: 0, bself: 0, kids: new Map(),
					      depth: node.depth + 1, parent: node };
					node.kids.set(names[j], k);
				}
				k.v += now;
				k.b += base;
				node = k;
			}
			node.self += now;
			node.bself += base;
		}
		return root;
	}

	// Preorder, children by name, as flame.js walks the SVG's frames.
	function preorder(n, out) {
		out.push(n);
		Array.from(n.kids.keys()).sort().forEach(function (k) { preorder(n.kids.get(k), out); });
		return out;
	}

	function pathOf(n) {
		var names = [];
		for (; n && n.parent; n = n.parent)
			names.unshift(n.name);
		return names.join(";");
	}

	function nodeAt(root, path) {
		var n = root;
		if (!path)
			return root;
		path.split(";").forEach(function (name) { n = n && n.kids.get(name); });
		return n || root;
	}

	// ---- drawing ------------------------------------------------------------------------
	function hue(name) {
		var h = 0;
		for (var i = 0; i < name.length; i++)
			h = (h * 31 + name.charCodeAt(i)) >>> 0;
		return "hsl(" + (10 + h % 45) + ", 80%, " + (58 + h % 13) + "%)";
	}

	// Compare: red grew, blue shrank, by the change of the frame's share of its profile.
	function diffColour(n, root) {
		var now = root.v ? n.v / root.v : 0, base = root.b ? n.b / root.b : 0, d = now - base;
		var k = Math.min(1, Math.abs(d) * 4);
		if (Math.abs(d) < 0.005)
			return "rgb(225, 225, 225)";
		var c = Math.round(225 - 165 * k);
		return d > 0 ? "rgb(230, " + c + ", " + c + ")" : "rgb(" + c + ", " + (c + 20) + ", 230)";
	}

	function describe(n) {
		var r = shown.root, pct = r.v ? (100 * n.v / r.v).toFixed(2) : "0";
		var s = n.name + " (" + n.v + " " + shown.unit + ", " + pct + "%";
		if (shown.diff) {
			var bp = r.b ? (100 * n.b / r.b).toFixed(2) : "0";
			s += "; base " + n.b + ", " + bp + "%";
		}
		return s + ")";
	}

	function draw() {
		var el = $("flame"), s = hashState(), root = shown.root, width = el.clientWidth || 1000;
		var zoom = nodeAt(root, s.z), scale = zoom.v ? width / zoom.v : 0, maxDepth = 0;
		var frag = document.createDocumentFragment();
		var put = function (n, x, w, dim) {
			var d = document.createElement("div");
			d.className = "fr" + (dim ? " dim" : "");
			d.style.left = x.toFixed(1) + "px";
			d.style.width = Math.max(w - 1, 1).toFixed(1) + "px";
			d.style.top = (n.depth * FRAME_H) + "px";
			d.style.background = shown.diff ? diffColour(n, root) : n.depth ? hue(n.name) :
				"#ddd";
			d.textContent = w > 24 ? n.name : "";
			d.title = describe(n);
			d.frame = n;
			frag.appendChild(d);
			if (n.depth > maxDepth)
				maxDepth = n.depth;
		};
		el.textContent = "";
		for (var a = zoom.parent; a; a = a.parent)
			put(a, 0, width, true);
		// the zoomed frame and its descendants, scaled to the whole width
		(function lay(n, x) {
			var w = n.v * scale;
			if (w < 0.5)
				return;
			put(n, x, w, false);
			Array.from(n.kids.keys()).sort().forEach(function (k) {
				var kid = n.kids.get(k);
				lay(kid, x);
				x += kid.v * scale;
			});
		})(zoom, 0);
		el.appendChild(frag);
		el.style.height = ((maxDepth + 1) * FRAME_H) + "px";
		$("reset").hidden = !s.z;
		search(s.q || "");
	}

	function search(term) {
		var frames = $("flame").children, sum = 0, re;
		$("search").value = term;
		if (!term) {
			for (var i = 0; i < frames.length; i++)
				frames[i].classList.remove("match");
			$("matched").textContent = "";
			return;
		}
		try {
			re = new RegExp(term);
		} catch (e) {
			$("matched").textContent = "Bad regular expression: " + e.message;
			return;
		}
		for (var j = 0; j < frames.length; j++)
			frames[j].classList.toggle("match", re.test(frames[j].frame.name));
		// over the whole profile, not only what is drawn: a match counts once however deep
		var all = preorder(shown.root, []), inside = Infinity;
		all.forEach(function (n) {
			if (n.depth <= inside)
				inside = Infinity;
			if (n.depth && re.test(n.name) && inside === Infinity) {
				sum += n.v;
				inside = n.depth;
			}
		});
		var total = shown.root.v;
		$("matched").textContent = "Matched: " + (total ? 100 * sum / total : 0).toFixed(1) +
			"% (" + sum + " of " + total + ")";
	}

	// The functions by self and total; total counts a function once per stack (recursion).
	function topTable() {
		var fns = new Map(), s = hashState(), by = s.sort === "total" ? "total" : "self";
		(function walk(n, onStack) {
			if (n.depth >= 2) { // 0: all, 1: the thread's name, not a function
				var f = fns.get(n.name);
				if (!f)
					fns.set(n.name, f = { name: n.name, self: 0, total: 0 });
				f.self += n.self;
				if (!onStack.has(n.name))
					f.total += n.v;
			}
			var next = n.depth >= 2 ? new Set(onStack).add(n.name) : onStack;
			n.kids.forEach(function (k) { walk(k, next); });
		})(shown.root, new Set());
		var rows = Array.from(fns.values()).sort(function (a, b) {
			return b[by] - a[by] || (a.name < b.name ? -1 : 1);
		}).slice(0, TOP_ROWS), total = shown.root.v || 1, body = document.createDocumentFragment();
		rows.forEach(function (f) {
			var tr = document.createElement("tr");
			[f.name, f.self + " (" + (100 * f.self / total).toFixed(1) + "%)",
			 f.total + " (" + (100 * f.total / total).toFixed(1) + "%)"].forEach(function (t) {
				var td = document.createElement("td");
				td.textContent = t;
				tr.appendChild(td);
			});
			tr.onclick = function () { setHash({ q: "^" + f.name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&") + "$" }); };
			body.appendChild(tr);
		});
		var tb = document.querySelector("#top tbody");
		tb.textContent = "";
		tb.appendChild(body);
		document.querySelectorAll("#top th button").forEach(function (b) {
			b.classList.toggle("on", b.dataset.sort === by);
		});
	}

	// ---- downloads: of what is shown ------------------------------------------------------
	function downloads(items) {
		var span = $("downloads");
		span.textContent = "Download:";
		items.forEach(function (it) {
			var b = document.createElement("button");
			b.textContent = it.label;
			b.dataset.download = it.label;
			b.onclick = function () {
				get(it.path, it.params).then(function (r) { return r.blob(); }).then(function (blob) {
					var a = document.createElement("a");
					a.href = URL.createObjectURL(blob);
					a.download = it.file;
					document.body.appendChild(a);
					a.click();
					a.remove();
					setTimeout(function () { URL.revokeObjectURL(a.href); }, 10000);
				}, function (e) {
					if (isAuthError(e))
						unauthorized(e);
					else
						setState("error", e.message);
				});
			};
			span.appendChild(b);
		});
	}

	// ---- the views ----------------------------------------------------------------------
	function fileName(s, ext) {
		return (s.p || "").replace(/^\//, "").replace(/[^A-Za-z0-9._-]+/g, "_") + "." +
			(s.type || "cpu") + "." + ext;
	}

	function showProfile(text, diff, unit, g, s) {
		if (g !== generation)
			return;
		shown = { root: parseFolded(text, diff), unit: unit, diff: diff };
		if (!shown.root.v && !shown.root.b) {
			clearView();
			setState("empty", diff ? "Neither range has samples of this profile." :
				 "No samples of this profile in this range. Pick a longer range, or " +
				 "another profile type.");
			return;
		}
		$("content").hidden = false;
		draw();
		topTable();
		setState("ready", diff && !shown.root.b ? "The base has no samples: everything " +
			 "shows as grown." : "");
		window.apertureDrawn = performance.now();
	}

	var UNITS = { cpu: "samples", offcpu: "us", locks: "us", alloc: "bytes",
		      alloc_objects: "samples", monitors: "us" };

	function renderFlame(s, g) {
		var type = s.type || "cpu", params = rangeParams(new URLSearchParams(), "", s.range,
								  s.from, s.until);
		var base = s.p + "/" + type;
		downloads(["folded", "pprof", "svg", "json"].map(function (ext) {
			return { label: ext, path: base + "." + ext, params: params,
				 file: fileName(s, ext) };
		}));
		return getText(base + ".folded", params).then(function (t) {
			showProfile(t, false, UNITS[type], g, s);
		});
	}

	function renderCompare(s, g) {
		var type = s.type || "cpu", params = new URLSearchParams();
		params.set("type", type);
		params.set("path", s.p);
		params.set("base", s.bp || s.p);
		rangeParams(params, "", s.range, s.from, s.until);
		// no base range: another scope over the same range, or this one just before
		var b = s.brange ? { brange: s.brange, bfrom: s.bfrom, buntil: s.buntil } :
			s.bp ? { brange: s.range, bfrom: s.from, buntil: s.until } : previousRange(s);
		rangeParams(params, "base_", b.brange, b.bfrom, b.buntil);
		var svg = new URLSearchParams(params);
		svg.set("format", "svg");
		downloads([{ label: "folded", path: "/compare", params: params,
			     file: fileName(s, "diff.folded") },
			   { label: "svg", path: "/compare", params: svg, file: fileName(s, "diff.svg") }]);
		return getText("/compare", params).then(function (t) {
			showProfile(t, true, UNITS[type], g, s);
		});
	}

	function renderThreads(s, g) {
		downloads([]);
		var files = [["deadlocks", "/threads/deadlocks"], ["busy", "/threads/busy"]];
		var parts = files.map(function (f) {
			return getText(s.p + f[1]).then(function (t) {
				if (g === generation)
					$(f[0]).textContent = t || (f[0] === "deadlocks" ? "No deadlock." :
								    "Nothing recorded.");
			});
		});
		parts.push(get(s.p + "/blocking.json").then(function (r) { return r.json(); })
			   .then(function (doc) {
			if (g !== generation)
				return;
			blockedTable(doc);
		}));
		return Promise.all(parts).then(function () {
			if (g === generation)
				setState("ready", "");
		});
	}

	// blocking.json: events of workers blocked past the threshold, grouped by thread.
	function blockedTable(doc) {
		var el = $("blocked"), events = doc.events || doc.blocked || [], by = new Map();
		el.textContent = "";
		events.forEach(function (e) {
			var k = (e.thread || e.name || "?") + " tid " + (e.tid || "?");
			var t = by.get(k) || { n: 0, us: 0, stack: e.stack };
			t.n++;
			t.us += e.dur_us || e.duration_us || 0;
			by.set(k, t);
		});
		if (!by.size) {
			el.textContent = "No blocked worker in what the node sent.";
			return;
		}
		var table = document.createElement("table");
		table.innerHTML = "<tr><th>thread</th><th>times</th><th>blocked us</th><th>last stack</th></tr>";
		by.forEach(function (t, k) {
			var tr = document.createElement("tr");
			[k, t.n, t.us, Array.isArray(t.stack) ? t.stack.map(function (f) {
				return f && f.name || f;
			}).join(" < ") : t.stack || ""]
				.forEach(function (v) {
					var td = document.createElement("td");
					td.textContent = v;
					tr.appendChild(td);
				});
			table.appendChild(tr);
		});
		el.appendChild(table);
	}

	function render() {
		var s = hashState(), g = ++generation, view = s.view || "flame";
		var isTarget = /^\/nodes\/[^/]+\/targets\/\d+$/.test(s.p || "");
		markCurrent();
		if (!s.p) {
			$("toolbar").hidden = true;
			$("hint").hidden = false;
			return Promise.resolve();
		}
		if (view === "threads" && !isTarget)
			view = "flame";
		$("hint").hidden = true;
		$("toolbar").hidden = false;
		$("title").textContent = s.p;
		$("tab-threads").hidden = !isTarget;
		document.querySelectorAll(".tabs button").forEach(function (b) {
			b.classList.toggle("on", b.dataset.view === view);
		});
		fillSelect($("type"), TYPES.map(function (t) { return [t, t]; }), s.type || "cpu");
		fillSelect($("range"), RANGES, s.range || "3600");
		fillSelect($("brange"), [["", "the same length, just before"]].concat(RANGES), s.brange || "");
		$("custom").hidden = s.range !== "custom";
		$("bcustom").hidden = s.brange !== "custom";
		if (s.range === "custom") {
			$("from").value = s.from ? localInput(+s.from) : "";
			$("until").value = s.until ? localInput(+s.until) : "";
		}
		if (s.brange === "custom") {
			$("bfrom").value = s.bfrom ? localInput(+s.bfrom) : "";
			$("buntil").value = s.buntil ? localInput(+s.buntil) : "";
		}
		fillBase();
		$("compare-controls").hidden = view !== "compare";
		$("flame-controls").hidden = view === "threads";
		$("flame-pane").hidden = view === "threads";
		$("top-pane").hidden = view === "threads";
		$("threads-pane").hidden = view !== "threads";
		clearView();
		setState("loading", "Loading...");
		var work = view === "compare" ? renderCompare(s, g) :
			view === "threads" ? renderThreads(s, g) : renderFlame(s, g);
		return work.catch(function (e) {
			if (g !== generation)
				return;
			if (isAuthError(e)) {
				unauthorized(e);
				return;
			}
			clearView();
			setState("error", e.message);
		});
	}

	// "the same length, just before": compare's default base for one scope.
	function previousRange(s) {
		if (s.range === "custom")
			return { brange: "custom", bfrom: 2 * s.from - s.until - 1, buntil: s.from - 1 };
		var n = +(s.range || 3600), now = Math.floor(Date.now() / 1000);
		return { brange: "custom", bfrom: now - 2 * n + 1, buntil: now - n };
	}

	// ---- wiring -------------------------------------------------------------------------
	$("auth").onsubmit = function (ev) {
		ev.preventDefault();
		localStorage.setItem("aperture-token", $("token").value.trim());
		$("token").value = "";
		setState("loading", "Trying the token...");
		$("token").placeholder = "token kept in this browser";
		loadNav().then(render);
	};
	$("forget").onclick = function () {
		localStorage.removeItem("aperture-token");
		unauthorized(new HttpError(401, "no token"));
	};
	document.querySelectorAll(".tabs button").forEach(function (b) {
		b.onclick = function () {
			var s = hashState(), patch = { view: b.dataset.view, z: "" };
			if (b.dataset.view === "compare" && !s.bp && !s.brange)
				Object.assign(patch, previousRange(s));
			setHash(patch);
		};
	});
	$("type").onchange = function () { setHash({ type: this.value, z: "" }); };
	$("range").onchange = function () {
		var now = Math.floor(Date.now() / 1000), s = hashState();
		if (this.value === "custom")
			setHash({ range: "custom", from: s.from || now - (+s.range || 3600), until: s.until || now });
		else
			setHash({ range: this.value, from: "", until: "" });
	};
	$("apply-range").onclick = function () {
		setHash({ from: fromInput($("from").value), until: fromInput($("until").value) });
	};
	$("brange").onchange = function () {
		var s = hashState(), now = Math.floor(Date.now() / 1000);
		if (this.value === "custom")
			setHash({ brange: "custom", bfrom: s.bfrom || now - 7200, buntil: s.buntil || now - 3600 });
		else if (!this.value)
			setHash(previousRange(s));
		else
			setHash({ brange: this.value, bfrom: "", buntil: "" });
	};
	$("apply-brange").onclick = function () {
		setHash({ bfrom: fromInput($("bfrom").value), buntil: fromInput($("buntil").value) });
	};
	$("base").onchange = function () {
		var v = this.value, s = hashState();
		setHash(v ? { bp: v, brange: "", bfrom: "", buntil: "" } :
			Object.assign({ bp: "" }, previousRange(s)));
	};
	var searchTimer;
	$("search").oninput = function () {
		var v = this.value;
		clearTimeout(searchTimer);
		searchTimer = setTimeout(function () { setHash({ q: v }); }, 250);
	};
	$("reset").onclick = function () { setHash({ z: "" }); };
	$("flame").onclick = function (ev) {
		var f = ev.target.frame;
		if (f)
			setHash({ z: f.parent ? pathOf(f) : "" });
	};
	$("flame").onmouseover = function (ev) {
		if (ev.target.frame)
			$("details").textContent = describe(ev.target.frame);
	};
	document.querySelectorAll("#top th button").forEach(function (b) {
		b.onclick = function () { setHash({ sort: b.dataset.sort }); };
	});
	window.addEventListener("keydown", function (e) {
		if (e.key === "Escape" && hashState().z)
			setHash({ z: "" });
	});
	// Search and zoom redraw without fetching again; everything else renders anew.
	var last = hashState();
	window.addEventListener("hashchange", function () {
		var s = hashState(), local = shown && ["p", "type", "range", "from", "until", "view",
			"bp", "brange", "bfrom", "buntil"].every(function (k) { return s[k] === last[k]; });
		last = s;
		if (local) {
			draw();
			topTable();
		} else {
			render();
		}
	});
	window.addEventListener("resize", function () { if (shown) draw(); });
	if (token())
		$("token").placeholder = "token kept in this browser";
	loadNav();
	render();
})();
