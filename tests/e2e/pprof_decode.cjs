// Decodes a gzip'd pprof file with the npm package pprof-format (an implementation of
// profile.proto independent of ours) and prints its samples as JSON:
// {"types": [[type, unit]...], "period": N, "samples": [{"thread", "frames" (leaf first),
// "values"}]}. Usage: NODE_PATH=.../node_modules node pprof_decode.cjs FILE
const { Profile } = require("pprof-format");
const fs = require("fs");
const zlib = require("zlib");

const p = Profile.decode(zlib.gunzipSync(fs.readFileSync(process.argv[2])));
const str = (i) => p.stringTable.strings[Number(i)];
const functions = new Map(p.function.map((f) => [Number(f.id), f]));
const locations = new Map(p.location.map((l) => [Number(l.id), l]));
const mappings = new Map(p.mapping.map((m) => [Number(m.id), m]));
const samples = p.sample.map((s) => ({
	thread: s.label.filter((l) => str(l.key) === "thread").map((l) => str(l.str))[0],
	frames: s.locationId.flatMap((id) =>
		locations.get(Number(id)).line.map((line) => str(functions.get(Number(line.functionId)).name))),
	modules: s.locationId.map((id) => {
		const m = mappings.get(Number(locations.get(Number(id)).mappingId));
		return m ? [str(m.filename), str(m.buildId)] : null;
	}),
	values: s.value.map(Number),
}));
console.log(JSON.stringify({
	types: p.sampleType.map((t) => [str(t.type), str(t.unit)]),
	period: Number(p.period),
	periodType: p.periodType ? [str(p.periodType.type), str(p.periodType.unit)] : null,
	samples: samples,
}));
