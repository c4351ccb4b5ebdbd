;;; agentfix.el --- Agent fix through eglot  -*- lexical-binding: t; -*-

;; Package-Requires: ((emacs "28.1") (eglot "1.9"))
;; Keywords: tools, languages

;;; Commentary:

;; agentfix is a language server (see the project's README).  eglot alone
;; is enough to use it: `eglot-code-actions' on a region offers
;; "Agent fix: selection", and eglot applies the proposal (the server's one
;; `workspace/applyEdit') after its y-or-n-p confirmation.
;;
;; This file adds what eglot 1.9 (Emacs 28) lacks for agentfix:
;;
;; - `agentfix-fix': ask agentfix to fix the flymake diagnostics of the
;;   current line (or region), whatever flymake backend produced them
;;   (eglot only sends a server its own diagnostics, and agentfix publishes
;;   none); with a prefix argument, also an instruction.  The command runs
;;   asynchronously: `eglot-execute-command' in eglot 1.9 waits with
;;   jsonrpc's 10-second default timeout, far less than a run takes.
;; - `agentfix-cancel': cancels the runs started by `agentfix-fix'
;;   ($/cancelRequest; eglot 1.9 has no work-done progress, so there is no
;;   progress token to cancel).
;;
;; It uses a few eglot and jsonrpc internals (`eglot--pos-to-lsp-position',
;; `eglot--TextDocumentIdentifier', `eglot--signal-textDocument/didChange',
;; `jsonrpc--async-request-1'), as eglot extensions commonly do; they exist in
;; eglot 1.9 and later.

;;; Code:

(require 'cl-lib)
(require 'eglot)
(require 'jsonrpc)
(require 'flymake)

(defgroup agentfix nil
  "Agent fix through eglot."
  :group 'tools)

(defcustom agentfix-request-timeout 900
  "Seconds to wait for the answer of one agentfix run.
The server's own limit is its `timeoutSecs' setting (300 s by default),
and the proposal waits for your confirmation too."
  :type 'integer)

(defvar agentfix-last-result nil
  "The last `agentfix.fix' result plist, or (:error CODE MESSAGE).")

(defvar agentfix--runs nil
  "Runs in progress: a list of (SERVER . REQUEST-ID).")

(defun agentfix--severity (type)
  "LSP severity of flymake diagnostic TYPE."
  (let ((name (symbol-name type)))
    (cond ((string-match-p "error" name) 1)
          ((string-match-p "warning" name) 2)
          (t 3))))

(defun agentfix--diagnostics (beg end)
  "The flymake diagnostics between BEG and END as LSP diagnostics."
  (vconcat
   (cl-loop for d in (flymake-diagnostics beg end)
            collect (list :range (list :start (eglot--pos-to-lsp-position
                                               (flymake-diagnostic-beg d))
                                       :end (eglot--pos-to-lsp-position
                                             (flymake-diagnostic-end d)))
                          :severity (agentfix--severity (flymake-diagnostic-type d))
                          :message (flymake-diagnostic-text d)
                          :source "flymake"))))

(defun agentfix--done (server id result error)
  "Record the end of run ID on SERVER: RESULT, or ERROR (CODE . MESSAGE)."
  (setq agentfix--runs (cl-remove-if (lambda (r) (and (eq (car r) server)
                                                      (equal (cdr r) id)))
                                     agentfix--runs))
  (cond
   (error
    (setq agentfix-last-result (list :error (car error) (cdr error)))
    (if (eql (car error) -32800)
        (message "agentfix: cancelled; nothing was changed")
      (message "agentfix: %s" (cdr error))))
   (t
    (setq agentfix-last-result result)
    (message "agentfix: %s (%s turn(s), %s+%s tokens)"
             (plist-get result :message) (plist-get result :turns)
             (plist-get result :inputTokens) (plist-get result :outputTokens)))))

(defun agentfix--execute (server argument)
  "Run `agentfix.fix' with ARGUMENT on SERVER without blocking Emacs."
  (let* ((id nil)
         (params `(:command "agentfix.fix" :arguments [,argument]))
         (success (lambda (result) (agentfix--done server id result nil)))
         (failure (lambda (err)
                    (agentfix--done server id nil
                                    (cons (plist-get err :code)
                                          (plist-get err :message)))))
         (timeout (lambda ()
                    (agentfix--done server id nil
                                    (cons nil "no answer in time")))))
    (if (fboundp 'jsonrpc--async-request-1)
        (setq id (car (jsonrpc--async-request-1
                       server :workspace/executeCommand params
                       :success-fn success :error-fn failure
                       :timeout-fn timeout :timeout agentfix-request-timeout)))
      (jsonrpc-async-request server :workspace/executeCommand params
                             :success-fn success :error-fn failure
                             :timeout-fn timeout :timeout agentfix-request-timeout))
    (push (cons server id) agentfix--runs)
    (message "agentfix: asking the model...")
    id))

;;;###autoload
(defun agentfix-fix (&optional instruction)
  "Ask agentfix to fix the diagnostics of the current line or region.
With a prefix argument, read an INSTRUCTION too (needed where there is
no diagnostic).  The proposal arrives as one workspace edit that eglot
applies to the buffers after asking."
  (interactive (list (when current-prefix-arg
                       (read-string "agentfix instruction: "))))
  (let* ((server (eglot--current-server-or-lose))
         (region (use-region-p))
         (beg (if region (region-beginning) (line-beginning-position)))
         (end (if region (region-end) (line-end-position)))
         (diagnostics (agentfix--diagnostics beg end))
         (instruction (and instruction (not (string-empty-p instruction)) instruction)))
    (eglot--signal-textDocument/didChange)
    (let* ((actions (jsonrpc-request
                     server :textDocument/codeAction
                     (list :textDocument (eglot--TextDocumentIdentifier)
                           :range (list :start (eglot--pos-to-lsp-position beg)
                                        :end (eglot--pos-to-lsp-position end))
                           :context (list :diagnostics diagnostics))))
           (pick (or (cl-find "quickfix" actions
                              :key (lambda (a) (plist-get a :kind)) :test #'equal)
                     (and (or instruction region)
                          (cl-find "refactor.rewrite" actions
                                   :key (lambda (a) (plist-get a :kind)) :test #'equal)))))
      (unless pick
        (user-error "agentfix: no diagnostic here; C-u M-x agentfix-fix to give an instruction, or select a region"))
      (let* ((command (plist-get pick :command))
             (argument (copy-sequence (aref (plist-get command :arguments) 0))))
        (when instruction
          (setq argument (plist-put argument :instruction instruction)))
        (agentfix--execute server argument)))))

;;;###autoload
(defun agentfix-cancel ()
  "Cancel the agentfix runs in progress."
  (interactive)
  (if (null agentfix--runs)
      (message "agentfix: nothing to cancel")
    (dolist (run agentfix--runs)
      (when (cdr run)
        (jsonrpc-notify (car run) :$/cancelRequest (list :id (cdr run)))))
    (message "agentfix: cancelling...")))

(provide 'agentfix)
;;; agentfix.el ends here
