// Interaction for Aperture's flame graphs (views/svg.c writes FLAME and the frames before
// this). Frames are <g><title>NAME (N unit, P%...)</title><rect/><text/></g> in preorder:
// a frame's descendants follow it until a frame no deeper than it, which is how zoom finds
// them and how search counts a match once however deep it nests.
"use strict";
(function () {
	var frames = document.getElementById("frames").children;
	var details = document.getElementById("details");
	var matched = document.getElementById("matched");
	var resetBtn = document.getElementById("reset");
	var clearBtn = document.getElementById("clear");
	var n = frames.length, info = [];
	var avail = FLAME.width - 2 * FLAME.padX;

	for (var i = 0; i < n; i++) {
		var g = frames[i], title = g.firstChild.textContent, rect = g.querySelector("rect");
		var cut = title.lastIndexOf(" (");
		var m = /^ \((\d+)/.exec(title.slice(cut));
		info.push({
			g: g, rect: rect, text: g.querySelector("text"), title: title,
			name: title.slice(0, cut), samples: m ? +m[1] : 0,
			x: +rect.getAttribute("x"), w: +rect.getAttribute("width"),
			depth: Math.round((FLAME.base - +rect.getAttribute("y")) / FLAME.frameH),
			fill: rect.getAttribute("fill"),
		});
	}

	function label(f, width) {
		var fit = Math.floor((width - 6) / FLAME.fontW);
		if (!f.text) {
			if (fit < 3)
				return;
			f.text = document.createElementNS("http://www.w3.org/2000/svg", "text");
			f.text.setAttribute("y", +f.rect.getAttribute("y") + FLAME.frameH - 5);
			f.g.appendChild(f.text);
		}
		var chars = Array.from(f.name);
		f.text.textContent = fit < 3 ? "" :
			chars.length <= fit ? f.name : chars.slice(0, fit - 2).join("") + "..";
		f.text.setAttribute("x", +f.rect.getAttribute("x") + 3);
	}

	function place(f, x, w) {
		f.rect.setAttribute("x", x.toFixed(1));
		f.rect.setAttribute("width", w.toFixed(1));
		label(f, w);
	}

	function zoom(i) {
		var z = info[i], scale = avail / z.w, want = z.depth - 1, j;
		for (j = 0; j < n; j++)
			info[j].g.classList.add("hide");
		for (j = i; j < n && (j === i || info[j].depth > z.depth); j++) {
			info[j].g.classList.remove("hide", "dim");
			place(info[j], FLAME.padX + (info[j].x - z.x) * scale, info[j].w * scale);
		}
		for (j = i - 1; j >= 0 && want >= 0; j--) {
			if (info[j].depth !== want)
				continue;
			info[j].g.classList.remove("hide");
			info[j].g.classList.add("dim");
			place(info[j], FLAME.padX, avail);
			want--;
		}
		resetBtn.classList.remove("hide");
	}

	function unzoom() {
		for (var j = 0; j < n; j++) {
			info[j].g.classList.remove("hide", "dim");
			place(info[j], info[j].x, info[j].w);
		}
		resetBtn.classList.add("hide");
	}

	function search(term) {
		var re, j, sum = 0, inside = Infinity;
		try {
			re = new RegExp(term);
		} catch (e) {
			matched.textContent = "Bad regular expression: " + e.message;
			return;
		}
		for (j = 0; j < n; j++) {
			var f = info[j];
			if (f.depth <= inside)
				inside = Infinity; // left the subtree of the match counted last
			var hit = re.test(f.name);
			f.rect.setAttribute("fill", hit ? "#e040e0" : f.fill);
			if (hit && inside === Infinity) {
				sum += f.samples;
				inside = f.depth;
			}
		}
		var share = FLAME.total ? 100 * sum / FLAME.total : 0;
		matched.textContent = "Matched: " + share.toFixed(1) + "% (" + sum + " of " +
			FLAME.total + ") /" + term + "/";
		clearBtn.classList.remove("hide");
	}

	function clearSearch() {
		for (var j = 0; j < n; j++)
			info[j].rect.setAttribute("fill", info[j].fill);
		matched.textContent = " ";
		clearBtn.classList.add("hide");
	}

	function frameOf(target) {
		var g = target.closest && target.closest("#frames > g");
		return g ? Array.prototype.indexOf.call(frames, g) : -1;
	}

	document.documentElement.addEventListener("click", function (e) {
		var i = frameOf(e.target);
		if (i >= 0)
			zoom(i);
		else if (e.target === resetBtn)
			unzoom();
		else if (e.target === clearBtn)
			clearSearch();
		else if (e.target.id === "search") {
			var term = window.prompt("Search frames (regular expression):", "");
			if (term)
				search(term);
		}
	});
	document.documentElement.addEventListener("mouseover", function (e) {
		var i = frameOf(e.target);
		if (i >= 0)
			details.textContent = info[i].title;
	});
	document.documentElement.addEventListener("mouseout", function (e) {
		if (frameOf(e.target) >= 0)
			details.textContent = " ";
	});
	window.addEventListener("keydown", function (e) {
		if (e.key === "Escape")
			unzoom();
		else if ((e.ctrlKey || e.metaKey) && e.key === "f") {
			e.preventDefault();
			var term = window.prompt("Search frames (regular expression):", "");
			if (term)
				search(term);
		}
	});
	// For scripts and links: flame.svg?s=REGEX searches on load.
	var q = /[?&]s=([^&]*)/.exec(window.location.search);
	if (q)
		search(decodeURIComponent(q[1]));
	window.flame = { zoom: zoom, unzoom: unzoom, search: search, clear: clearSearch };
})();
