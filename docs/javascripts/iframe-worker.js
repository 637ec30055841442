// slipstream's documentation, opened from the file system (file://): browsers refuse to start a
// Web Worker there, and the theme's search runs in one. This stand-in for `Worker` runs the
// worker's script in a hidden frame of the page instead, passing messages through the frame's
// window, so search works with no server and nothing fetched from outside. Our own code; the
// name is the one mkdocs-material's offline plugin looks for, so it adds no script of its own.
"use strict";

(() => {
  if (window.location.protocol !== "file:") return;

  class FrameWorker extends EventTarget {
    constructor(url) {
      super();
      this.onmessage = null;
      this.pending = [];
      this.frame = document.createElement("iframe");
      this.frame.hidden = true;
      document.body.appendChild(this.frame);
      const scope = this.frame.contentWindow;
      // the worker's `postMessage(data)` answers the page
      scope.postMessage = (data) => window.setTimeout(() => this.receive(data), 0);
      scope.importScripts = () => {
        throw new Error("importScripts is not available to a worker run from file://");
      };
      const script = scope.document.createElement("script");
      script.src = new URL(url, window.location.href).href;
      script.onload = () => {
        this.scope = scope;
        this.pending.splice(0).forEach((data) => this.postMessage(data));
      };
      scope.document.head.appendChild(script);
    }

    // the page's `worker.postMessage(data)`: a message event in the worker's scope
    postMessage(data) {
      if (!this.scope) {
        this.pending.push(data);
        return;
      }
      window.setTimeout(() => this.scope.dispatchEvent(new this.scope.MessageEvent("message", { data })), 0);
    }

    receive(data) {
      const event = new MessageEvent("message", { data });
      if (typeof this.onmessage === "function") this.onmessage(event);
      this.dispatchEvent(event);
    }

    terminate() {
      this.frame.remove();
      this.scope = null;
    }
  }

  window.Worker = FrameWorker;
})();
