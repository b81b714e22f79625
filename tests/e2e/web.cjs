// The page in headless Chromium (Debian's, driven by playwright-core), for test_web.py:
// node web.cjs CONFIG.json. It does what a person would and prints what it saw as JSON; the
// Python test holds the ground truth and asserts. Screenshots go to config.out.
"use strict";
const fs = require("fs");
const path = require("path");
const { chromium } = require("playwright-core");

const cfg = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const seen = { errors: [] };
const ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
	      "--disable-background-networking", "--disable-component-update", "--disable-sync"];

async function browser(dir) {
	return chromium.launchPersistentContext(dir, {
		executablePath: "/usr/bin/chromium", headless: true, args: ARGS,
		viewport: { width: 1500, height: 900 }, acceptDownloads: true,
	});
}

async function open(ctx, hash) {
	const page = await ctx.newPage();
	page.on("pageerror", (e) => seen.errors.push(e.message));
	// No network but the aggregator: anything else the page asked for would show here.
	page.on("request", (r) => {
		if (!r.url().startsWith(cfg.url) && !r.url().startsWith("blob:") &&
		    !r.url().startsWith("data:"))
			seen.errors.push("request outside the aggregator: " + r.url());
	});
	await page.goto(cfg.url + "/" + (hash || ""));
	return page;
}

async function ready(page) {
	await page.waitForSelector("main[data-state=ready], main[data-state=error], " +
				   "main[data-state=unauthorized], main[data-state=empty]",
				   { timeout: 15000 });
	return page.getAttribute("main", "data-state");
}

async function shot(page, name) {
	await page.screenshot({ path: path.join(cfg.out, name + ".png"), fullPage: true });
}

async function go(page, hash) {
	await page.evaluate((h) => { location.hash = h; }, hash);
	// the hash change starts a render; wait for it to leave the state it was in
	await page.waitForFunction(() => document.querySelector("main").dataset.state !== "loading",
				   null, { timeout: 15000 });
	return ready(page);
}

// A node's own daemon serving the page: no token on its loopback listener; the node, its
// target, the flame graph and the folded download.
async function nodePage() {
	const ctx = await browser(path.join(cfg.out, "profile-node"));
	const page = await open(ctx, "");
	const target = `/nodes/${cfg.node}/targets/${cfg.pid}`;
	await page.waitForSelector(`nav a[data-path="${target}"]`, { timeout: 15000 });
	seen.nav = await page.textContent("nav");
	await page.click(`nav a[data-path="${target}"]`);
	seen.flame_state = await ready(page);
	seen.top = await page.$$eval("#top tbody tr", (rows) =>
		rows.map((r) => Array.from(r.cells).map((c) => c.textContent)));
	seen.flame_names = await page.$$eval("#flame .fr", (fs) => fs.map((f) => f.frame.name));
	await shot(page, "node-flame");
	const [dl] = await Promise.all([page.waitForEvent("download"),
					page.click('#downloads button[data-download="folded"]')]);
	seen.download = fs.readFileSync(await dl.path(), "utf8");
	await ctx.close();
}

(async () => {
	if (cfg.node_page) {
		await nodePage();
		process.stdout.write(JSON.stringify(seen));
		return;
	}
	const ctx = await browser(path.join(cfg.out, "profile-good"));
	const page = await open(ctx, "");
	// The token, entered once: kept in localStorage for the next page.
	await page.fill("#token", cfg.token);
	await page.click("#auth button[type=submit]");
	const target = `/nodes/${cfg.node}/targets/${cfg.pid}`;
	await page.waitForSelector(`nav a[data-path="${target}"]`, { timeout: 15000 });
	seen.nav = await page.textContent("nav");
	await shot(page, "1-nav");

	// The target's cpu flame graph and the top table beside it.
	await page.click(`nav a[data-path="${target}"]`);
	seen.flame_state = await ready(page);
	seen.top = await page.$$eval("#top tbody tr", (rows) =>
		rows.map((r) => Array.from(r.cells).map((c) => c.textContent)));
	seen.frames = await page.$$eval("#flame .fr", (fs) => fs.length);
	await shot(page, "2-flame");

	// A click on the hot function's frame zooms: it then spans the whole width.
	const hot = `#flame .fr >> text="${cfg.hot}"`;
	const before = await page.$eval("#flame", (el) => el.clientWidth);
	await page.locator(hot).first().click();
	await page.waitForFunction(() => /z=/.test(location.hash), null, { timeout: 5000 });
	seen.zoom_hash = await page.evaluate(() => location.hash);
	seen.zoom_width = await page.locator(hot).first().evaluate((el) => el.getBoundingClientRect().width);
	seen.flame_width = before;
	await shot(page, "3-zoomed");
	await page.click("#reset");

	// A search shows the share of what matches.
	await page.fill("#search", `^${cfg.hot}$`);
	await page.waitForFunction(() => /Matched/.test(document.getElementById("matched").textContent),
				   null, { timeout: 5000 });
	seen.matched = await page.textContent("#matched");
	seen.search_hash = await page.evaluate(() => location.hash);
	await shot(page, "4-search");

	// The same link in a new page shows the same view (the token is kept).
	const again = await open(ctx, seen.search_hash);
	await ready(again);
	await again.waitForFunction(() => /Matched/.test(document.getElementById("matched").textContent),
				    null, { timeout: 5000 });
	seen.link_matched = await again.textContent("#matched");
	await again.close();

	// Compare: two ranges of a service as a diff flame graph.
	seen.compare_state = await go(page, cfg.compare_hash);
	seen.compare = await page.$$eval("#flame .fr", (fs) => fs.map((f) => ({
		name: f.frame.name, bg: getComputedStyle(f).backgroundColor })));
	await shot(page, "5-compare");

	// Threads of the deadlocked workload.
	seen.threads_state = await go(page, `#p=/nodes/${cfg.node}/targets/${cfg.deadlock_pid}&view=threads`);
	await page.waitForFunction(() => document.getElementById("deadlocks").textContent.length > 0,
				   null, { timeout: 10000 });
	seen.deadlocks = await page.textContent("#deadlocks");
	await shot(page, "6-threads");

	// Downloads are what is shown: the folded file of the target.
	await go(page, `#p=${target}`);
	const [dl] = await Promise.all([page.waitForEvent("download"),
					page.click('#downloads button[data-download="folded"]')]);
	seen.download_name = dl.suggestedFilename();
	seen.download = fs.readFileSync(await dl.path(), "utf8");
	await ctx.close();

	// A wrong token: the unauthorized state, and no stack data anywhere on the page.
	const bad = await browser(path.join(cfg.out, "profile-bad"));
	const bp = await open(bad, `#p=${target}`);
	await bp.fill("#token", "not-a-token");
	await bp.click("#auth button[type=submit]");
	await bp.waitForSelector("main[data-state=unauthorized]", { timeout: 10000 });
	seen.bad_state = await bp.getAttribute("main", "data-state");
	seen.bad_text = await bp.textContent("body");
	seen.bad_frames = await bp.$$eval("#flame .fr", (fs) => fs.length);
	await shot(bp, "7-unauthorized");
	await bad.close();
	process.stdout.write(JSON.stringify(seen));
})().catch((e) => {
	seen.errors.push(String(e && e.stack || e));
	process.stdout.write(JSON.stringify(seen));
	process.exit(1);
});
