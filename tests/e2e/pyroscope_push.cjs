// A Node.js program profiled by Pyroscope's own client (@pyroscope/nodejs), pushing to the
// aggregator: node pyroscope_push.cjs URL TOKEN SECONDS. Its hot function, hotSpinFunction,
// spins most of the time; the test looks for it under services/webapp-push/.
"use strict";
const Pyroscope = require("@pyroscope/nodejs");

const [url, token, seconds] = process.argv.slice(2);
Pyroscope.init({ serverAddress: url, appName: "webapp-push", authToken: token,
		 flushIntervalMs: 1000, tags: { region: "test" } });
Pyroscope.start();

function hotSpinFunction(ms) {
	const end = Date.now() + ms;
	let x = 0;
	while (Date.now() < end)
		x += Math.sqrt(x + 1);
	return x;
}

const stop = Date.now() + 1000 * +seconds;
(function loop() {
	hotSpinFunction(50);
	if (Date.now() < stop)
		setImmediate(loop);
	else
		Pyroscope.stop().then(() => process.exit(0));
})();
