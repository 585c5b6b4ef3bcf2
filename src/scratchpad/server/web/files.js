// A pad's files (#/pads/<name>/files/<dir…>): list a directory of the pad's workspace,
// walk into directories, download, preview images, upload (file input or drag-and-drop, the
// server's refusal shown as it says it), delete after a confirmation.

import { download, getJSON, padPath, request, signedUrl } from "./api.js";
import { confirmDialog, h, replace } from "./dom.js";
import { bytes, stamp } from "./format.js";
import { padHeader } from "./padstatus.js";

const IMAGE = /\.(png|jpe?g|gif|webp|svg)$/i;

export function mount(root, params) {
  const view = new FilesView(root, params.name, params.dir || "");
  return () => view.close();
}

/** A path inside the pad as URL segments ('/' kept between them). */
function filePath(pad, path) {
  return `${padPath(pad)}/files/${path.split("/").map(encodeURIComponent).join("/")}`;
}

function dirHash(pad, dir) {
  const rest = dir ? `/${dir.split("/").map(encodeURIComponent).join("/")}` : "";
  return `#/pads/${encodeURIComponent(pad)}/files${rest}`;
}

class FilesView {
  constructor(root, name, dir) {
    this.name = name;
    this.dir = dir.replace(/^\/+|\/+$/g, "");
    this.header = padHeader(name, "files");
    this.crumbs = h("nav", { class: "crumbs", "aria-label": "folder" });
    this.body = h("tbody", {});
    this.notice = h("div", { class: "notice", role: "status", "aria-live": "polite", hidden: true });
    this.preview = h("figure", { class: "preview", hidden: true });
    this.picker = h("input", { type: "file", id: "upload", multiple: true, class: "visually-hidden" });
    this.picker.addEventListener("change", () => this.upload([...this.picker.files]));
    const table = h(
      "table",
      { class: "files" },
      h("thead", {}, h("tr", {}, ["Name", "Size", "Modified", ""].map((t) => h("th", { scope: "col" }, t)))),
      this.body,
    );
    this.zone = h(
      "section",
      { class: "files-page" },
      this.header.element,
      h("div", { class: "files-bar" }, this.crumbs, h("label", { for: "upload", class: "button primary" }, "Upload files"), this.picker),
      this.notice,
      h("p", { class: "hint" }, "Drop files here to upload them into this folder."),
      table,
      this.preview,
    );
    this.dragging(this.zone);
    root.replaceChildren(this.zone);
    this.load();
    getJSON("/v1/pads")
      .then(({ pads }) => this.header.setInfo(pads.find((pad) => pad.name === name) || null))
      .catch(() => {});
  }

  dragging(zone) {
    zone.addEventListener("dragover", (event) => {
      event.preventDefault();
      zone.classList.add("drop");
    });
    zone.addEventListener("dragleave", (event) => {
      if (!zone.contains(event.relatedTarget)) zone.classList.remove("drop");
    });
    zone.addEventListener("drop", (event) => {
      event.preventDefault();
      zone.classList.remove("drop");
      this.upload([...(event.dataTransfer?.files || [])]);
    });
  }

  async load() {
    this.drawCrumbs();
    try {
      const query = this.dir ? `?path=${encodeURIComponent(this.dir)}` : "";
      const listing = await getJSON(`${padPath(this.name)}/files${query}`);
      replace(this.body, listing.entries.map((entry) => this.row(entry)));
      if (!listing.entries.length) replace(this.body, h("tr", {}, h("td", { colspan: 4, class: "empty" }, "This folder is empty.")));
      if (listing.truncated) this.say("Only the first entries of this folder are listed.");
    } catch (error) {
      replace(this.body);
      this.say(`Could not list the files: ${error.message}`, true);
    }
  }

  drawCrumbs() {
    const parts = this.dir ? this.dir.split("/") : [];
    const links = [h("a", { href: dirHash(this.name, "") }, "workspace")];
    parts.forEach((part, i) => links.push(" / ", h("a", { href: dirHash(this.name, parts.slice(0, i + 1).join("/")) }, part)));
    replace(this.crumbs, links);
  }

  row(entry) {
    const url = filePath(this.name, entry.path);
    const isDir = entry.type === "dir";
    const name = isDir
      ? h("a", { href: dirHash(this.name, entry.path), class: "dir" }, `${entry.name}/`)
      : // through a signed URL (a link cannot carry the session); no `download` attribute:
        // Chromium cancels such a download when the answer carries a sandboxing CSP, and the
        // server's attachment header makes it a download anyway
        h("a", { href: `${url}?download=1`, onclick: (event) => this.save(event, entry, url) }, entry.name);
    const actions = h("div", { class: "row-actions" });
    if (!isDir && IMAGE.test(entry.name)) {
      actions.append(h("button", { type: "button", class: "small", onclick: () => this.show(entry, url) }, "Preview"));
    }
    actions.append(h("button", { type: "button", class: "small danger", "aria-label": `Delete ${entry.name}`, onclick: () => this.remove(entry, url) }, "Delete"));
    return h(
      "tr",
      { "data-path": entry.path },
      h("th", { scope: "row" }, name),
      h("td", { class: "num" }, isDir ? "—" : bytes(entry.size)),
      h("td", {}, stamp(entry.modified)),
      h("td", {}, actions),
    );
  }

  save(event, entry, url) {
    event.preventDefault();
    download(`${url}?download=1`).catch((error) => this.say(`Could not download ${entry.name}: ${error.message}`, true));
  }

  async show(entry, url) {
    let src;
    try {
      src = await signedUrl(url); // an image cannot carry the session either
    } catch (error) {
      return this.say(`Could not show ${entry.name}: ${error.message}`, true);
    }
    this.preview.hidden = false;
    replace(this.preview, h("img", { src, alt: entry.name }), h("figcaption", {}, entry.path));
  }

  async upload(files) {
    for (const file of files) {
      const path = this.dir ? `${this.dir}/${file.name}` : file.name;
      this.say(`Uploading ${file.name} (${bytes(file.size)})…`);
      try {
        await request(filePath(this.name, path), { method: "PUT", body: file });
        this.say(`Uploaded ${file.name}.`);
      } catch (error) {
        this.say(`Could not upload ${file.name}: ${error.message}`, true);
        break;
      }
    }
    this.picker.value = "";
    this.load();
  }

  async remove(entry, url) {
    const what =
      entry.type === "dir"
        ? "This folder is deleted from the pad's workspace if it is empty; a folder with anything in it stays (delete what is in it first)."
        : "This file is deleted from the pad's workspace.";
    if (!(await confirmDialog(`Delete ${entry.name}?`, what, "Delete"))) return;
    try {
      await request(url, { method: "DELETE" });
      this.say(`Deleted ${entry.name}.`);
    } catch (error) {
      this.say(`Could not delete ${entry.name}: ${error.message}`, true);
    }
    this.load();
  }

  say(message, bad = false) {
    this.notice.hidden = false;
    this.notice.className = bad ? "notice bad" : "notice";
    this.notice.textContent = message;
  }

  close() {
    this.header.destroy();
  }
}
