// The app a build attack releases when its build got through: it answers
// "built" on every path. The attack is the build script (package.json):
// it compiles testdata/attack, which the test puts in attack/, and runs
// it on the plan the test commits as plan.json.
require("http").createServer((req, res) => res.end("built")).listen(process.env.PORT);
console.log("listening on", process.env.PORT);
