"""Cloud metadata from a fake instance metadata service on loopback.

enrichment.cloud_metadata_url points the probes at a local HTTP server that
answers as AWS (IMDSv2 token + identity document), GCP or Azure would; the
.col header then carries cloud_provider and cloud_info with gProfiler's
keys. Without a metadata service the provider is "unknown" and the probe
costs well under two seconds; enrichment.cloud_metadata: false skips it.
"""
import glob
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pputil  # noqa: E402
from pputil import check  # noqa: E402

MODE = {"cloud": "aws"}
AWS_DOC = {"region": "eu-west-1", "availabilityZone": "eu-west-1a", "instanceType": "m5.large",
           "accountId": "123456789012", "imageId": "ami-1", "instanceId": "i-0abc"}
GCP = {"id": 4242, "zone": "projects/1/zones/us-central1-a",
       "machineType": "projects/1/machineTypes/n2-standard-4", "scheduling": {"preemptible": "TRUE"},
       "preempted": "FALSE", "image": "projects/debian-cloud/global/images/debian-12", "name": "vm-1"}
AZURE = {"vmId": "vm-guid", "vmSize": "Standard_D2s_v3", "zone": "1", "location": "westeurope",
         "subscriptionId": "sub", "resourceGroupName": "rg", "resourceId": "/subs/rg/vm", "name": "az-vm",
         "storageProfile": {"imageReference": {"offer": "debian-12", "publisher": "Debian"}}}


class H(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def send(self, code, body):
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_PUT(self):
        if MODE["cloud"] == "aws" and self.path == "/latest/api/token" and \
                self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
            self.send(200, "TOKEN-1")
        else:
            self.send(405, "")

    def do_GET(self):
        c = MODE["cloud"]
        if c == "aws" and self.headers.get("X-aws-ec2-metadata-token") == "TOKEN-1":
            if self.path == "/latest/dynamic/instance-identity/document":
                return self.send(200, AWS_DOC)
            if self.path == "/latest/meta-data/instance-life-cycle":
                return self.send(200, "spot")
        if c == "gcp" and self.path.startswith("/computeMetadata/v1/instance/") and \
                self.headers.get("Metadata-Flavor") == "Google":
            return self.send(200, GCP)
        if c == "azure" and self.path.startswith("/metadata/instance/compute/") and \
                self.headers.get("Metadata") == "true":
            return self.send(200, AZURE)
        self.send(404, "")


srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
threading.Thread(target=srv.serve_forever, daemon=True).start()
work = pputil.tempdir("ppcloud-")


def header_with(yaml_text):
    y = os.path.join(work, "c.yaml")
    with open(y, "w") as f:
        f.write(yaml_text)
    out = pputil.tempdir()
    t0 = time.time()
    p = pputil.run_agent(out, pputil.PLUGIN_DIR, "--example-mode", "states", "--config", y, duration=1)
    el = time.time() - t0
    cols = glob.glob(os.path.join(out, "profile_*.col"))
    if p.returncode != 0 or not cols:
        return {}, el
    return pputil.parse_col(cols[0])[0]["metadata"], el


url = "enrichment:\n  cloud_metadata_url: http://127.0.0.1:%d\n" % srv.server_address[1]
md, _ = header_with(url)
check(md.get("cloud_provider") == "aws", "AWS detected (%s)" % md.get("cloud_provider"))
check(md.get("cloud_info") == {"region": "eu-west-1", "zone": "eu-west-1a", "instance_type": "m5.large",
                               "life_cycle": "spot", "account_id": "123456789012", "image_id": "ami-1",
                               "instance_id": "i-0abc"}, "AWS cloud_info (%s)" % md.get("cloud_info"))
MODE["cloud"] = "gcp"
md, _ = header_with(url)
check(md.get("cloud_provider") == "gcp" and md.get("cloud_info", {}).get("zone") == "us-central1-a"
      and md["cloud_info"]["instance_type"] == "n2-standard-4" and md["cloud_info"]["preemptible"] is True
      and md["cloud_info"]["instance_id"] == "4242", "GCP detected with cloud_info (%s)" % md.get("cloud_info"))
MODE["cloud"] = "azure"
md, _ = header_with(url)
check(md.get("cloud_provider") == "azure" and md.get("cloud_info", {}).get("region") == "westeurope"
      and md["cloud_info"]["image_info"]["offer"] == "debian-12", "Azure detected with cloud_info")
MODE["cloud"] = "none"
md, _ = header_with(url)
check(md.get("cloud_provider") == "unknown" and "cloud_info" not in md, "no cloud: unknown, no cloud_info")
md, el = header_with("enrichment:\n  cloud_metadata_url: http://127.0.0.1:1\n")
check(md.get("cloud_provider") == "unknown", "nothing listening: unknown")
md, el2 = header_with("enrichment:\n  cloud_metadata: false\n  cloud_metadata_url: http://127.0.0.1:%d\n"
                      % srv.server_address[1])
MODE["cloud"] = "aws"
check(md.get("cloud_provider") == "unknown", "enrichment.cloud_metadata: false skips the probes")
md, el = header_with("{}\n")  # the real link-local address: no IMDS on a test machine
check(el < el2 + 2.0, "default probe fails fast without a metadata service (%.1f s vs %.1f s)" % (el, el2))
pputil.finish()
