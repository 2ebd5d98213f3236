// The victim tenant's app. It holds a secret in its environment
// (VICTIM_SECRET) and says where its instance listens: GET any path
// answers {addr, boot}, like the attack app's /whoami.
const http = require("http");
const os = require("os");
const boot = require("crypto").randomBytes(8).toString("hex");

function ownAddress() {
  for (const list of Object.values(os.networkInterfaces())) {
    for (const a of list) {
      if (a.family === "IPv4" && !a.internal) return a.address;
    }
  }
  return "127.0.0.1";
}

http.createServer((req, res) => {
  res.setHeader("content-type", "application/json");
  res.end(JSON.stringify({ addr: ownAddress() + ":" + process.env.PORT, boot }));
}).listen(process.env.PORT);
console.log("victim listening on", process.env.PORT);
