"""Drive an emulated phone with uiautomator2's official Python client.

Usage: u2_official_client.py ADB_PORT SERIAL TEXT

Connects through the adb server on 127.0.0.1:ADB_PORT to the phone SERIAL
the way `uiautomator2.connect` does (push u2.jar, launch it with
app_process, wait for /ping), then reads, clicks, types TEXT and uses the
clipboard. Prints one JSON object with what it saw; any failure raises.
"""

import json
import sys

import adbutils
import uiautomator2 as u2
from uiautomator2.version import __version__


def main() -> None:
    port, serial, text = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    device = adbutils.AdbClient(host="127.0.0.1", port=port).device(serial)
    d = u2.connect(device)
    seen = {"version": __version__}
    seen["info"] = d.info
    xml = d.dump_hierarchy()
    seen["dump_has_settings"] = 'text="Settings"' in xml
    seen["dump_starts"] = xml[:60]
    d.set_clipboard("Grüße 你好")
    seen["clipboard"] = d.clipboard
    field = d(resourceId="com.android.launcher3:id/search_box")
    field.click()
    d.send_keys(text)
    seen["typed"] = field.get_text()
    d(text="Settings").click()
    seen["front_after_click"] = d.info["currentPackageName"]
    seen["missing_exists"] = bool(d(text="No such element").exists)
    d.stop_uiautomator()
    print(json.dumps(seen))


if __name__ == "__main__":
    main()
